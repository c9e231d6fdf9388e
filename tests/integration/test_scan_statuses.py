"""`gpudiag scan` against the real sshd fleet: every way a host can fail gets its own status and reason,
and the healthy hosts of the same run still end ok. The same fleet in Ansible's form scans the same."""
import base64
import hashlib
import socket
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def status_setup(sshd_fleet, tmp_path_factory):
    fleet = sshd_fleet
    tmp = tmp_path_factory.mktemp("statuses")
    h0, h1, h2 = fleet.host("h0"), fleet.host("h1"), fleet.host("h2")
    # h0, h1 trusted; h2 known with another key (changed); h3 absent (unknown).
    fake = Path(str(fleet.unauthorized_key) + ".pub").read_text().split()
    known = tmp / "known_hosts"
    known.write_text(f"{h0.known_hosts_line}\n{h1.known_hosts_line}\n{h2.host_id} {fake[0]} {fake[1]}\n")
    with socket.socket() as probe:                    # a port with nothing behind it
        probe.bind((h0.address, 0))
        closed_port = probe.getsockname()[1]
    spaced_dir = tmp / "my python"
    spaced_dir.mkdir()
    (spaced_dir / "python3").symlink_to(fleet.system_python)
    marker = tmp / "semicolon-ran"
    garbage = fleet.script("garbage-python", "cat >/dev/null\necho 'this is not a frame'")
    variants = {
        "closed": ("h0", {"port": closed_port}),
        "noauth": ("h0", {"identity_file": str(fleet.unauthorized_key)}),
        "nopython": ("h0", {"python": "/nonexistent/bin/python3"}),
        "garbage": ("h1", {"python": str(garbage)}),
        "noisy": ("h0", {"user": "gdnoisy", "python": fleet.system_python}),
        "spaced": ("h1", {"python": str(spaced_dir / "python3")}),
        "semicolon": ("h1", {"python": f"/nonexistent/py;touch {marker}"}),
    }
    return fleet, tmp, known, variants, marker, fake


def fingerprint(key_base64):
    digest = hashlib.sha256(base64.b64decode(key_base64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def scan_form(status_setup, form):
    fleet, tmp, known, variants, _, _ = status_setup
    inventory = fleet.write_inventory(tmp / f"{form}.yaml", ["h0", "h1", "h2", "h3"], form=form, variants=variants)
    reports = tmp / f"reports-{form}"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--timeout", "60",
                             "--json", env=fleet.env(GPUDIAG_KNOWN_HOSTS=str(known), GPUDIAG_REPORTS=str(reports)),
                             timeout=120)
    assert proc.returncode == 3, proc.stderr       # some hosts could not be scanned
    run, hosts = fleet.load_run(proc, reports)
    return run, hosts


@pytest.fixture(scope="module")
def scanned(status_setup):
    return scan_form(status_setup, "gpudiag")


def assert_healthy_still_ok(hosts):
    for name in ("h0", "h1"):
        assert hosts[name]["status"] == "ok", hosts[name]["reason"]
        assert hosts[name]["probes"]["env"]["status"] == "ok"


def test_every_host_has_a_status_in_run_json(scanned):
    run, hosts = scanned
    names = {"h0", "h1", "h2", "h3", "closed", "noauth", "nopython", "garbage", "noisy", "spaced", "semicolon"}
    assert {h["name"] for h in run["hosts"]} == names
    assert set(hosts) == names
    assert run["interrupted"] is False


def test_closed_port_is_unreachable(scanned, sshd_fleet):
    _, hosts = scanned
    assert hosts["closed"]["status"] == "unreachable"
    assert "connection refused" in hosts["closed"]["reason"]
    assert_healthy_still_ok(hosts)


def test_unknown_host_key_names_its_fingerprint(scanned, sshd_fleet):
    _, hosts = scanned
    h3 = sshd_fleet.host("h3")
    assert hosts["h3"]["status"] == "host_key_unknown"
    assert h3.host_key_fingerprint in hosts["h3"]["reason"]
    assert "ssh-ed25519" in hosts["h3"]["reason"] and "--accept-new" in hosts["h3"]["reason"]
    assert_healthy_still_ok(hosts)


def test_changed_host_key_names_both_fingerprints_and_the_line(scanned, status_setup, sshd_fleet):
    _, hosts = scanned
    _, _, known, _, _, fake = status_setup
    reason = hosts["h2"]["reason"]
    assert hosts["h2"]["status"] == "host_key_changed"
    assert sshd_fleet.host("h2").host_key_fingerprint in reason
    assert fingerprint(fake[1]) in reason
    assert f"{known}:3" in reason
    assert_healthy_still_ok(hosts)


def test_unauthorized_key_is_auth_failed(scanned, sshd_fleet):
    _, hosts = scanned
    assert hosts["noauth"]["status"] == "auth_failed"
    assert "refused" in hosts["noauth"]["reason"] and str(sshd_fleet.unauthorized_key) in hosts["noauth"]["reason"]
    assert_healthy_still_ok(hosts)


def test_missing_interpreter_is_python_missing(scanned):
    _, hosts = scanned
    assert hosts["nopython"]["status"] == "python_missing"
    assert "/nonexistent/bin/python3" in hosts["nopython"]["reason"]
    assert_healthy_still_ok(hosts)


def test_garbage_instead_of_a_frame_is_frame_error(scanned):
    _, hosts = scanned
    assert hosts["garbage"]["status"] == "frame_error"
    assert "no gpudiag frame" in hosts["garbage"]["reason"]
    assert "this is not a frame" in hosts["garbage"]["output_tail"]["stdout"]
    assert_healthy_still_ok(hosts)


def test_bashrc_noise_on_stdout_does_not_break_the_frame(scanned):
    _, hosts = scanned
    assert hosts["noisy"]["status"] == "ok", hosts["noisy"]["reason"]
    assert hosts["noisy"]["probes"]["env"]["status"] == "ok"


def test_inventory_values_reach_the_remote_shell_quoted(scanned, status_setup):
    _, hosts = scanned
    _, tmp, _, _, marker, _ = status_setup
    assert hosts["spaced"]["status"] == "ok", hosts["spaced"]["reason"]
    assert hosts["spaced"]["python"] == str(tmp / "my python" / "python3")
    assert hosts["semicolon"]["status"] == "python_missing"
    assert not marker.exists()                      # `touch` after the `;` never ran


def test_ansible_form_of_the_same_fleet_scans_identically(scanned, status_setup):
    _, hosts = scanned
    _, ansible_hosts = scan_form(status_setup, "ansible")
    assert {n: (h["status"], h["reason"]) for n, h in ansible_hosts.items()} == \
        {n: (h["status"], h["reason"]) for n, h in hosts.items()}


KILL_SELF = """exec {python} -c '
import os, signal, sys
sys.stdin.readline()
print("GPUDIAG-BEGIN half a frame", flush=True)
os.kill(os.getpid(), signal.{sig})
'"""


def test_a_probe_killed_on_the_host_is_probe_killed_with_its_signal_not_a_dropped_connection(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    variants = {
        "sigkill": ("h0", {"python": str(fleet.script("kill-python", KILL_SELF.format(python=fleet.system_python,
                                                                                      sig="SIGKILL")))}),
        "sigsegv": ("h1", {"python": str(fleet.script("segv-python", KILL_SELF.format(python=fleet.system_python,
                                                                                      sig="SIGSEGV")))}),
        # a shell that does not exec its command reports the signal as 128+N
        "shell": ("h0", {"python": str(fleet.script("shell-kill-python",
                                                    KILL_SELF.format(python=fleet.system_python, sig="SIGKILL")
                                                    .replace("exec ", "", 1) + "\nexit $?"))}),
    }
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], variants=variants)
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--timeout", "60",
                             "--json", env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=120)
    assert proc.returncode == 3, proc.stderr
    hosts = fleet.load_run(proc, reports)[1]
    assert hosts["h0"]["status"] == "ok", hosts["h0"]["reason"]
    assert hosts["sigkill"]["status"] == "probe_killed", hosts["sigkill"]["reason"]
    assert hosts["sigkill"]["reason"].startswith("the probe process was killed by SIGKILL on the host")
    assert "OOM killer" in hosts["sigkill"]["reason"]
    # no runner ran to announce a pid (the stand-in kills itself first): the kernel log is not searched
    assert hosts["sigkill"]["oom"] == {"verdict": "not_checked",
                                       "reason": "the runner was killed before it announced its pid"}
    assert "sigsegv" not in hosts or "oom" not in hosts["sigsegv"]          # only SIGKILL is the OOM killer's
    assert hosts["sigsegv"]["status"] == "probe_killed"
    assert "killed by SIGSEGV on the host" in hosts["sigsegv"]["reason"]
    assert hosts["shell"]["status"] == "probe_killed"
    assert "SIGKILL on the host (exit 137, the shell's report of it)" in hosts["shell"]["reason"]
    report = fleet.run_gpudiag("report", env=fleet.env(GPUDIAG_REPORTS=str(reports)))
    assert "probe_killed" in report.stdout or "probe killed" in report.stdout, report.stdout
