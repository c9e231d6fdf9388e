"""The container transport through `gpudiag scan`: a stand-in `docker` on PATH records its argv and runs
the rest as docker exec does, locally and over ssh; odd inventory values (spaces, quotes, `;`) arrive as single
words."""
import json
import os

from gpudiag.bundle import bootstrap_argv

# `exec -i NAME CMD...` as docker runs it: CMD starts detached (its own session) under a shim that holds its
# stdout and stderr and copies them through the client; the client forwards its stdin. When the client is gone
# (killed, or its session closed) CMD's stdin ends, but its output pipes stay open, read and dropped by the shim,
# and CMD runs on.
COPY = r'''
import os, subprocess, sys, threading
def copy(src, dst, close_dst):
    broken = False
    while True:
        try:
            data = os.read(src, 65536)
        except OSError:
            data = b""
        if not data:
            break
        while data and not broken:
            try:
                data = data[os.write(dst, data):]
            except OSError:
                broken = True
    if close_dst:
        os.close(dst)
def relay(argv):
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    threading.Thread(target=copy, args=(0, proc.stdin.fileno(), True), daemon=True).start()
    outs = [threading.Thread(target=copy, args=(proc.stdout.fileno(), 1, False)),
            threading.Thread(target=copy, args=(proc.stderr.fileno(), 2, False))]
    for t in outs:
        t.start()
    for t in outs:
        t.join()
    rc = proc.wait()
    os._exit(rc if rc >= 0 else 128 - rc)
'''
EXEC_LIKE_DOCKER = "COPY = %r\nexec(COPY)\nrelay([sys.executable, '-c', COPY + 'relay(sys.argv[1:])'] + sys.argv[4:])\n" % COPY

STAND_IN = """#!{python}
import json, os, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["logs"]:
    sys.exit("Error response from daemon: No such container: " + sys.argv[-1])
if sys.argv[1:3] != ["exec", "-i"]:
    sys.exit("stand-in docker: expected `exec -i NAME CMD...`")
"""


def install_stand_in(directory, log, python):
    path = directory / "docker"
    path.write_text(STAND_IN.format(python=python, log=str(log)) + EXEC_LIKE_DOCKER)
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
    # Then the engine's log, outside the container: the odd name is one word there too.
    assert [json.loads(line) for line in log.read_text().splitlines()] == \
        [["exec", "-i", name, *bootstrap_argv(python)], ["logs", "--tail", "200000", "--", name]]
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
            [["exec", "-i", name, *bootstrap_argv(python)], ["logs", "--tail", "200000", "--", name]]
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


# A docker that also answers `logs --tail N -- NAME` with the container's log (on stderr, where sglang's
# logging goes), and whose container `stopped` cannot be exec'd into but still has its log.
LOGGING_STAND_IN = """#!{python}
import json, os, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["logs"]:
    if sys.argv[-1] == "gone":
        sys.exit("Error response from daemon: No such container: gone")
    sys.stdout.write("[2026-09-01 09:59:59] server_args=ServerArgs(api_key='sk-container-secret')\\n")
    sys.stdout.flush()
    with open({server_log!r}) as fh:
        sys.stderr.write(fh.read())
    sys.exit(0)
if sys.argv[4:5] == ["stopped"] or sys.argv[3:4] == ["stopped"]:
    sys.exit("Error response from daemon: container 4f2a is not running")
"""
CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "logs", "corpus")


def install_logging_stand_in(directory, log, python, tmp_path):
    """sglang #35437's DFlash capture_end assert, as the container's log."""
    server_log = tmp_path / "container-server.log"
    with open(os.path.join(CORPUS, "sglang_35437_dflash_breakable_capture_end.log")) as fh:
        server_log.write_text("".join(line for line in fh if not line.startswith("#fixture ")))
    path = directory / "docker"
    path.write_text(LOGGING_STAND_IN.format(python=python, log=str(log), server_log=str(server_log))
                    + EXEC_LIKE_DOCKER)
    os.chmod(path, 0o755)
    return path


def assert_container_log_read(host, name):
    record = host["probes"]["deployment"]["data"]["server_logs"][f"docker:{name}"]
    assert record["source"] == {"kind": "docker", "where": f"docker logs {name}",
                                "read_by": "gpudiag, outside the container"}
    assert record["outcome"] == "known_signature" and record["advice_assumes"] == "sglang 0.5.14+"
    crash = record["crashes"][0]
    assert crash["signature"]["name"] == "capture_end_no_active_capture"
    assert "--disable-prefill-cuda-graph" in crash["signature"]["recommendation"]
    assert record["dflash_draft_graph"]["state"] == "capture_failed"
    assert "sk-container-secret" not in json.dumps(host)   # only the verdict and matched lines are kept


def test_the_engines_log_is_read_outside_the_container_and_classified(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "docker-argv.jsonl"
    install_logging_stand_in(bin_dir, log, fleet.system_python, tmp_path)
    inventory = tmp_path / "inventory.yaml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": fleet.system_python}
    inventory.write_text(json.dumps({"all": {"hosts": {      # Ansible YAML: three local container hosts
        "box": dict(local, gpudiag_container="docker:sglang-dflash"),
        "down": dict(local, gpudiag_container="docker:stopped"),
        "gone": dict(local, gpudiag_container="docker:gone")}}}))
    reports = tmp_path / "reports"
    env = fleet.env(GPUDIAG_REPORTS=str(reports), PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "deployment", "--json", env=env,
                             timeout=180)
    assert proc.returncode == 3, proc.stderr      # `down` could not be scanned
    run, hosts = fleet.load_run(proc, reports)
    assert hosts["box"]["status"] == "ok" and hosts["box"]["transport"] == "local+docker"
    assert_container_log_read(hosts["box"], "sglang-dflash")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert ["logs", "--tail", "200000", "--", "sglang-dflash"] in calls
    # A stopped container: exec fails, its log still says why the server is gone.
    assert hosts["down"]["status"] == "unreachable"
    assert hosts["down"]["reason"].startswith("docker exec stopped: Error response from daemon")
    assert "; docker logs stopped: capture_end_no_active_capture at line" in hosts["down"]["reason"]
    # No such container for the logs either: the record says why no log was read.
    gone = hosts["gone"]["probes"]["deployment"]["data"]["server_logs"]["docker:gone"]
    assert gone["source"] is None and gone["reason"].startswith("docker logs gone: exit 1: ")
    assert "No such container: gone" in gone["reason"]
    report = fleet.run_gpudiag("report", run["run_id"], "--reports-dir", str(reports), "--json", env=env)
    findings = json.loads(report.stdout)["findings"]
    assert any(f["id"] == "cuda_graph.log_crash" and "capture_end_no_active_capture" in f["title"]
               and f["hosts"] == ["box"] for f in findings)


def test_the_engines_log_over_ssh_passes_the_login_shell_intact(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    log = tmp_path / "docker-argv.jsonl"
    stand_in = install_logging_stand_in(fleet.bin_dir, log, fleet.system_python, tmp_path)
    try:
        inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"],
                                          extra={"h0": {"container": "docker:sglang-dflash",
                                                        "python": fleet.system_python}})
        reports = tmp_path / "reports"
        proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "deployment", "--json",
                                 env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=180)
        assert proc.returncode == 1, proc.stderr     # the logged crash is an error finding
        host = fleet.load_run(proc, reports)[1]["h0"]
        assert host["status"] == "ok" and host["transport"] == "ssh+docker"
        assert_container_log_read(host, "sglang-dflash")
    finally:
        stand_in.unlink()
