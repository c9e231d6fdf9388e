"""The engine's log of a container host as the host sends it back: the exit mark, the 8 MiB cut, the
record it becomes (and where it lands in the host result)."""
import subprocess

from gpudiag.models import CommandResult, HostResult, ProbeResult
from gpudiag.transports import container_logs as cl


def run_script(tmp_path, engine_body, seconds=20):
    """The real `sh -c SCRIPT` with a stand-in engine, as a transport would run it."""
    engine = tmp_path / "engine"
    engine.write_text("#!/bin/sh\n" + engine_body)
    engine.chmod(0o755)
    argv = cl.fetch_argv("docker:srv", seconds)
    argv[argv.index("docker")] = str(engine)
    return subprocess.run(argv, capture_output=True, timeout=60).stdout


def test_the_exit_status_survives_the_pipe_and_the_log_keeps_its_lines(tmp_path):
    out = run_script(tmp_path, 'echo "to stdout"; echo "to stderr" >&2; printf "no newline"; exit 0\n')
    assert cl.split_output(out) == ("to stdout\nto stderr\nno newline", 0, False)
    out = run_script(tmp_path, 'echo "Error response from daemon: No such container: srv" >&2; exit 1\n')
    assert cl.split_output(out) == ("Error response from daemon: No such container: srv", 1, False)


def test_a_log_over_8_mib_is_cut_on_the_host_at_a_line_start(tmp_path):
    out = run_script(tmp_path, 'i=0; while [ $i -lt 90000 ]; do printf "%0100d\\n" $i; i=$((i+1)); done\n')
    assert len(out) == cl.TAIL_BYTES
    text, status, cut = cl.split_output(out)
    assert status == 0 and cut and text.splitlines()[-1] == "%0100d" % 89999
    assert all(len(line) == 100 for line in text.splitlines())   # the partial first line is dropped


def test_an_engine_that_never_ends_is_stopped_on_the_host_and_what_came_is_kept(tmp_path):
    out = run_script(tmp_path, "echo 'Capture cuda graph begin.'\nexec sleep 60\n", seconds=1)
    assert cl.split_output(out) == ("Capture cuda graph begin.", 124, False)

    class Outside:
        def run_outside(self, argv, timeout):
            self.argv, self.timeout = argv, timeout
            return CommandResult(0, self.out, b"", 20.0)

    transport = Outside()
    transport.out = out
    fetched = cl.fetch(transport, "docker:srv", seconds_left=600)
    assert transport.timeout == cl.FETCH_TIMEOUT and "timeout 20 " in transport.argv[2]
    assert fetched.text == "Capture cuda graph begin." and fetched.cut_note == "read stopped after 20 s"
    record = cl.classified(fetched, "docker", None)
    assert record["cut"] == "time" and record["truncated"] and record["cut_note"] == "read stopped after 20 s"
    transport.out = run_script(tmp_path, "exec sleep 60\n", seconds=1)
    assert cl.fetch(transport, "docker:srv", 600).reason == "read stopped after 20 s, nothing read"


def test_no_mark_means_no_exit_status():
    assert cl.split_output(b"sh: 1: tail: not found\n") == ("sh: 1: tail: not found", None, False)


def test_engines_and_when_the_log_is_wanted():
    assert cl.logs_command("podman:srv") == ["podman", "logs", "--tail", "200000", "--", "srv"]
    assert cl.logs_command("kubectl:prod/sglang-0") == ["kubectl", "logs", "--tail", "200000", "-n", "prod", "--",
                                                       "sglang-0"]
    assert cl.wanted("docker:srv", ["env", "deployment"]) and cl.wanted("docker:srv", None)
    assert not cl.wanted(None, ["deployment"]) and not cl.wanted("docker:srv", ["env"])


def test_the_record_lands_in_server_logs_with_the_installed_releases_advice():
    log = "[2026-01-01 TP0] Capture cuda graph begin.\nException: Capture cuda graph failed: boom\n"
    host = HostResult(name="h", status="ok", probes={
        "deployment": ProbeResult(status="ok", data={"servers": [], "server_logs": {}}),
        "sglang_source": ProbeResult(status="ok", data={"version": "0.5.11"})})
    got = cl.attach(host, "docker:srv", cl.FetchedLog("docker logs srv", text=log))
    record = got.probe_data("deployment")["server_logs"]["docker:srv"]
    assert record["source"]["where"] == "docker logs srv" and record["bytes_read"] == len(log.encode())
    assert record["advice_assumes"] == "sglang 0.5.11 (before 0.5.14)"
    assert "--cuda-graph-max-bs " in record["crashes"][0]["signature"]["recommendation"]
    assert host.probe_data("deployment")["server_logs"] == {}   # the original result is left as it was
    down = HostResult(name="h", status="unreachable", reason="docker exec srv: not running")
    got = cl.attach(down, "docker:srv", cl.FetchedLog("docker logs srv", text=log))
    assert got.reason.startswith("docker exec srv: not running; docker logs srv: capture_failed at line 2")
    failed = cl.attach(host, "docker:srv", cl.FetchedLog("docker logs srv", reason="exit 1: no such container"))
    assert failed.probe_data("deployment")["server_logs"]["docker:srv"] == {
        "source": None, "outcome": None, "reason": "docker logs srv: exit 1: no such container"}
