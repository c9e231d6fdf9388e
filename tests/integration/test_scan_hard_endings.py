"""Runs that never lie, through `gpudiag scan` and `gpudiag report` on the sshd fleet: SIGTERM and SIGHUP
stop a scan as Ctrl-C does, a run killed by -9 reads as incomplete, its temp files are cleaned by the
next run, a full disk makes the scan exit non-zero, a gpudiag bug is `internal_error` (exit 70), and a
missing, corrupt or stray host file is reported while the other hosts render."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def start_scan(fleet, tmp_path, reports, extra_hosts=("h0",)):
    slow = fleet.script("slow-python", "cat >/dev/null\nsleep 20")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", list(extra_hosts),
                                      variants={"slow": ("h2", {"python": str(slow)})})
    return subprocess.Popen(fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
                                                    "--timeout", "60"],
                            env=fleet.env(GPUDIAG_REPORTS=str(reports)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(fleet.home))


def wait_for_files(proc, reports, count, limit=45):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and len(list(reports.glob("runs/*/hosts/*.json"))) < count:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    assert len(list(reports.glob("runs/*/hosts/*.json"))) == count, "the fast hosts never finished"


def report(fleet, reports, *args):
    return fleet.run_gpudiag("report", *args, env=fleet.env(GPUDIAG_REPORTS=str(reports)))


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_keep_finished_hosts_and_mark_the_run_interrupted(sshd_fleet, tmp_path, signum, code):
    reports = tmp_path / "reports"
    proc = start_scan(sshd_fleet, tmp_path, reports, ("h0", "h1"))
    try:
        wait_for_files(proc, reports, 2)
        # run.json already plans every host, the slow one included, before the run ends.
        run = json.loads(next(reports.glob("runs/*/run.json")).read_text())
        assert sorted(run["planned"]) == ["h0", "h1", "slow"]
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=20)
        assert time.monotonic() - sent < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    run_dir = next(reports.glob("runs/*"))
    run = json.loads((run_dir / "run.json").read_text())
    assert run["interrupted"] is True and run["finished_at"] and run["signal"] == signal.Signals(signum).name
    assert {h["name"]: h["status"] for h in run["hosts"]} == {"h0": "ok", "h1": "ok", "slow": "interrupted"}
    shown = report(sshd_fleet, reports)
    assert shown.returncode == 3, shown.stderr                   # not "all clear"
    assert f"interrupted by {signal.Signals(signum).name}" in shown.stderr


def test_a_run_killed_by_sigkill_reads_as_incomplete_and_its_temp_files_are_cleaned(sshd_fleet, tmp_path):
    reports = tmp_path / "reports"
    proc = start_scan(sshd_fleet, tmp_path, reports, ("h0",))
    try:
        wait_for_files(proc, reports, 1)
        proc.kill()                                              # SIGKILL: no handler runs
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = next(reports.glob("runs/*"))
    # What a writer killed mid-write leaves: a temp file naming its (now dead) pid.
    leftover = run_dir / "hosts" / f".slow.json.{proc.pid}.tmp-x1y2"
    leftover.write_text('{"half": ')
    shown = report(sshd_fleet, reports, "--json")
    assert shown.returncode == 3, shown.stderr
    assert "incomplete: 1 of 2 hosts never finished (slow)" in shown.stderr
    doc = json.loads(shown.stdout)
    assert "never_finished" in json.dumps(doc)
    markdown = report(sshd_fleet, reports, "--markdown")
    assert markdown.returncode == 3 and "never_finished" in markdown.stdout
    # The next run removes the dead writer's temp file (and keeps the killed run's data).
    again = sshd_fleet.run_gpudiag("scan", "localhost", *sshd_fleet.fast_scan_args, "--json",
                                   env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)))
    assert again.returncode == 0, again.stderr
    assert not leftover.exists()
    assert (run_dir / "hosts" / "h0.json").is_file()


def test_a_result_that_cannot_be_written_makes_scan_exit_non_zero_and_report_says_so(sshd_fleet, tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        # The host's interpreter fills the disk before it answers: its result has nowhere to go.
        filler = sshd_fleet.script("disk-filling-python", f"""
i=0
while head -c 4096 /dev/zero > "{mount}/fill.$i" 2>/dev/null; do i=$((i+1)); done
exec {sshd_fleet.system_python} "$@"
""")
        inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], python=str(filler))
        proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args,
                                      env=sshd_fleet.env(GPUDIAG_REPORTS=str(mount)))
        assert proc.returncode == 3, proc.stderr
        assert "No space left on device" in proc.stderr and "result write(s) failed" in proc.stderr
        run = json.loads(next(mount.glob("runs/*/run.json")).read_text())
        assert run["finished_at"] and run["hosts"][0]["write_error"] == "h0.json: No space left on device"
        shown = report(sshd_fleet, mount, "--markdown")
        assert shown.returncode == 3, shown.stderr
        assert "h0: result missing (the result could not be written: h0.json: No space left on device)" \
            in shown.stderr
        assert "result_missing" in shown.stdout
    finally:
        subprocess.run(["umount", str(mount)], check=False)


PLANTED_BUG = """
import sys
import gpudiag.orchestrator as orchestrator
real = orchestrator.classify
def classify(host, *args, **kwargs):
    if host.name == "h1":
        return {}["a gpudiag bug"]
    return real(host, *args, **kwargs)
orchestrator.classify = classify
from gpudiag.cli import main
sys.argv = ["gpudiag"] + sys.argv[1:]
main()
"""


def test_a_gpudiag_bug_while_handling_one_host_is_internal_error_and_exit_70(sshd_fleet, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-c", PLANTED_BUG, "scan", "-i", str(inventory), "all",
                           *sshd_fleet.fast_scan_args, "--json"], capture_output=True, text=True, timeout=60,
                          env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports),
                                             PYTHONPATH=str(Path(__file__).resolve().parents[2])),
                          cwd=str(sshd_fleet.home))
    assert proc.returncode == 70, proc.stderr
    _, hosts = sshd_fleet.load_run(proc, reports)
    assert hosts["h0"]["status"] == "ok"
    assert hosts["h1"]["status"] == "internal_error"
    assert hosts["h1"]["reason"] == "gpudiag bug while handling this host: KeyError: 'a gpudiag bug'"


def test_missing_corrupt_and_stray_host_files_are_reported_while_the_rest_renders(sshd_fleet, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1", "h2"])
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                  env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)))
    assert proc.returncode == 0, proc.stderr
    run_dir = reports / "runs" / json.loads(proc.stdout)["run_id"]
    (run_dir / "hosts" / "h1.json").unlink()
    (run_dir / "hosts" / "h2.json").write_text('{"schema": 1, "name": "h2", "probes": [')
    (run_dir / "hosts" / "notes.txt").write_text("an operator's note")
    for args in (("--json",), ("--markdown",), ()):
        shown = report(sshd_fleet, reports, *args)
        assert shown.returncode == 3, shown.stderr
        assert "Traceback" not in shown.stderr
        assert "h1: result missing (hosts/h1.json is missing (status was ok))" in shown.stderr
        assert "hosts/h2.json: unreadable (hosts/h2.json:1: not valid JSON" in shown.stderr
        assert "hosts/notes.txt: unreadable (not a host result" in shown.stderr
        assert "result_missing" in shown.stdout and "unreadable" in shown.stdout
    doc = json.loads(report(sshd_fleet, reports, "--json").stdout)
    assert "h0" in json.dumps(doc) and '"ok"' in json.dumps(doc)   # the readable host still renders


@pytest.mark.parametrize("make_path, message", [
    (lambda tmp: Path("/proc/gpudiag-no-such/known_hosts"), "cannot be written (No such file or directory)"),
    (lambda tmp: Path("/etc/hostname/known_hosts"), "cannot be written (File exists)"),
])
def test_an_unusable_known_hosts_path_is_a_usage_error(sshd_fleet, tmp_path, make_path, message):
    path = make_path(tmp_path)
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args,
                                  "--accept-new", "--known-hosts", str(path),
                                  env=sshd_fleet.env(GPUDIAG_REPORTS=str(tmp_path / "reports")))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"gpudiag: error: known-hosts file {path}: " +
                                                proc.stderr.split(f"{path}: ", 1)[1].strip()]
    assert message in proc.stderr
    assert not (tmp_path / "reports").exists()   # refused before any run started


def test_repro_stops_on_sigterm_like_scan_and_its_run_plans_every_host(sshd_fleet, tmp_path):
    reports = tmp_path / "reports"
    slow = sshd_fleet.script("slow-python", "cat >/dev/null\nsleep 20")
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"],
                                           variants={"slow": ("h2", {"python": str(slow)})})
    proc = subprocess.Popen(sshd_fleet.gpudiag_argv() + ["repro", "cuda-graph-crash", "-i", str(inventory), "all",
                                                         "--batch-sizes", "1", "--draft-tokens", "2",
                                                         "--timeout", "90"],
                            env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(sshd_fleet.home))
    try:
        wait_for_files(proc, reports, 1, limit=90)
        run = json.loads(next(reports.glob("runs/*/run.json")).read_text())
        assert sorted(run["planned"]) == ["h0", "slow"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    assert "interrupted by SIGTERM" in err
    run = json.loads(next(reports.glob("runs/*/run.json")).read_text())
    assert run["kind"] == "repro" and run["interrupted"] is True and run["signal"] == "SIGTERM"
    assert {h["name"]: h["status"] for h in run["hosts"]}["slow"] == "interrupted"
    assert run["repro"]["outcome"]   # the repro's own block is written even for a stopped run
