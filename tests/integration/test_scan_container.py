"""The container transport through `gpudiag scan`: a stand-in `docker` on PATH records its argv and runs
the rest, locally and over ssh; odd inventory values (spaces, quotes, `;`) arrive as single words."""
import json
import os

from gpudiag.bundle import bootstrap_argv

STAND_IN = """#!{python}
import json, os, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] != ["exec", "-i"]:
    sys.exit("stand-in docker: expected `exec -i NAME CMD...`")
os.execvp(sys.argv[4], sys.argv[4:])
"""


def install_stand_in(directory, log, python):
    path = directory / "docker"
    path.write_text(STAND_IN.format(python=python, log=str(log)))
    os.chmod(path, 0o755)
    return path


def odd_python(tmp_path, target, name="py dir's"):
    """An interpreter path holding a space and a quote (no shell reads it locally)."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "python3").symlink_to(target)
    return str(directory / "python3")


def test_docker_exec_argv_locally(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, marker = tmp_path / "docker-argv.jsonl", tmp_path / "pwned"
    install_stand_in(bin_dir, log, fleet.system_python)
    python = odd_python(tmp_path, fleet.system_python)
    name = f"sglang;touch {marker}"
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": {"localhost": {"container": f"docker:{name}", "python": python}}}))
    reports = tmp_path / "reports"
    env = fleet.env(GPUDIAG_REPORTS=str(reports), PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "localhost", *fleet.fast_scan_args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    host = fleet.load_run(proc, reports)[1]["localhost"]
    assert host["status"] == "ok" and host["transport"] == "local+docker"
    assert [json.loads(line) for line in log.read_text().splitlines()] == \
        [["exec", "-i", name, *bootstrap_argv(python)]]
    assert not marker.exists()


def test_docker_exec_argv_over_ssh(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    log, marker = tmp_path / "docker-argv.jsonl", tmp_path / "pwned"
    stand_in = install_stand_in(fleet.bin_dir, log, fleet.system_python)   # first on the sessions' PATH
    try:
        # Over ssh a quote is refused (login shells read it differently); a space and `;` are quoted.
        python = odd_python(tmp_path, fleet.system_python, "py dir;x")
        name = f"sglang;touch {marker}"
        inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"],
                                          extra={"h0": {"container": f"docker:{name}", "python": python}})
        reports = tmp_path / "reports"
        proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json",
                                 env=fleet.env(GPUDIAG_REPORTS=str(reports)))
        assert proc.returncode == 0, proc.stderr
        host = fleet.load_run(proc, reports)[1]["h0"]
        assert host["status"] == "ok" and host["transport"] == "ssh+docker"
        assert [json.loads(line) for line in log.read_text().splitlines()] == \
            [["exec", "-i", name, *bootstrap_argv(python)]]
        assert not marker.exists()
    finally:
        stand_in.unlink()


def test_missing_container_engine_over_ssh_is_unreachable_in_the_shells_words(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"],
                                      extra={"h0": {"container": "podman:sglang"}})
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json",
                             env=fleet.env(GPUDIAG_REPORTS=str(reports)))
    assert proc.returncode == 3, proc.stderr
    host = fleet.load_run(proc, reports)[1]["h0"]
    assert host["status"] == "unreachable", host["reason"]
    assert host["reason"].startswith("podman exec sglang: ") and "podman" in host["reason"][20:]
    assert "not found" in host["reason"]
