"""A stop that stops, through `gpudiag scan` and `gpudiag bench` on the sshd fleet: SIGINT or SIGTERM while a
probe runs (its child hung) or while the bench load runs ends the command at once with 128 + the signal, keeps
the hosts that finished, and leaves no process of the remote runner, its children or its load on the host.

The host's interpreter is a wrapper script that writes the PID of each process it becomes into the test's
directory: the runner (`python -I -c ...`, exec'd, so the PID is the runner's) and each child (`-c ...` without
-I), which here is a shell that leads the child's process group and hangs. Processes are checked by those PIDs
and process groups, never by name."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.test_bench_cli import standin  # noqa: F401  (the stand-in sglang server fixture)
from tests.integration.test_children_reaped import alive, group_members

SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
GONE_WITHIN_S = 5.0


def recording_python(fleet, tmp_path, name, child_body):
    """A host interpreter that logs the runner's PID to runners.pids, and each child's (the group leader it
    becomes) to children.pids before running `child_body`."""
    runners, children = tmp_path / ("%s-runners.pids" % name), tmp_path / ("%s-children.pids" % name)
    script = fleet.script("%s-%s-python" % (tmp_path.name, name),
                          'if [ "$1" = "-I" ]; then echo $$ >> %s; exec %s "$@"; fi\necho $$ >> %s\n%s'
                          % (runners, sys.executable, children, child_body))
    return str(script), runners, children


def local_recording_python(tmp_path):
    """recording_python for a command run on this machine: its child hangs before any Python starts."""
    runners, children = tmp_path / "runners.pids", tmp_path / "children.pids"
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nif [ "$1" = "-I" ]; then echo $$ >> %s; exec %s "$@"; fi\necho $$ >> %s\n'
                      'sleep 600\n' % (runners, sys.executable, children))
    python.chmod(0o755)
    return str(python), runners, children


def pids(path):
    return [int(word) for word in path.read_text().split()] if path.exists() else []


def wait_until(check, limit, proc=None):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return True
        assert proc is None or proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return check()


def left_on_host(runners, leaders):
    """The runner PIDs still alive and the members still in each child's process group."""
    return [pid for pid in runners if alive(pid)] + [pid for pgid in leaders for pid in group_members(pgid)]


def stop_and_measure(proc, signum, gone):
    """Send `signum`, wait for the command to end, then up to GONE_WITHIN_S for `gone()`; (seconds from the
    signal to the exit, seconds from the signal to `gone()`, stderr)."""
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    wait_until(gone, GONE_WITHIN_S)
    return took, time.monotonic() - sent, err


def stop_while_the_child_hangs(argv, env, runners, children, cwd=None, signum=signal.SIGINT):
    """Start `argv`, send it `signum` once the child runs; (exit code, stderr, seconds to exit, seconds until the host is
    clear or the limit, processes before, processes after)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        assert wait_until(lambda: pids(children), 60, proc), "the torch child never started"
        before = left_on_host(pids(runners), pids(children))
        took, cleared, err = stop_and_measure(proc, signum,
                                              lambda: not left_on_host(pids(runners), pids(children)))
        after = left_on_host(pids(runners), pids(children))
    finally:
        cleanup(proc, pids(runners), pids(children))
    return proc.returncode, err, took, cleared, before, after


def cleanup(proc, runners, leaders):
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
    for pid in runners:
        _kill(pid, lambda p: os.kill(p, signal.SIGKILL))
    for pgid in leaders:
        _kill(pgid, lambda p: os.killpg(p, signal.SIGKILL))


def _kill(pid, how):
    try:
        how(pid)
    except ProcessLookupError:
        pass


def start_scan(fleet, tmp_path):
    """`gpudiag scan` of h0 (its torch child fails at once: the host ends soon) and `slow` (its torch child hangs),
    waited for until h0 is stored and the slow host's child runs; (process, reports, runners, children)."""
    slow, runners, children = recording_python(fleet, tmp_path, "slow", "sleep 600")
    fast, _, _ = recording_python(fleet, tmp_path, "fast", "exit 3")
    empty_proc = tmp_path / "proc"   # no live server elsewhere on this machine chooses the torch interpreter
    empty_proc.mkdir()
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", [], variants={
        "h0": ("h0", {"python": fast}), "slow": ("h1", {"python": slow})})
    reports = tmp_path / "reports"
    proc = subprocess.Popen(fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", "--probes", "env",
                                                    "--set", "deployment.proc_root=%s" % empty_proc,
                                                    "--timeout", "120"],
                            env=fleet.env(GPUDIAG_REPORTS=str(reports)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(fleet.home))
    try:
        assert wait_until(lambda: pids(children) and list(reports.glob("runs/*/hosts/h0.json")), 60, proc), \
            "the slow host's child never started, or h0 never finished"
    except BaseException:
        cleanup(proc, pids(runners), pids(children))
        raise
    return proc, reports, runners, children


@pytest.mark.parametrize("signum, code", SIGNALS)
def test_a_stopped_scan_ends_the_remote_runner_and_its_hung_child(sshd_fleet, tmp_path, signum, code):
    proc, reports, runners, children = start_scan(sshd_fleet, tmp_path)
    try:
        before = left_on_host(pids(runners), pids(children))
        took, cleared, err = stop_and_measure(proc, signum, lambda: not left_on_host(pids(runners), pids(children)))
        after = left_on_host(pids(runners), pids(children))
    finally:
        cleanup(proc, pids(runners), pids(children))
    print("scan %s: exit after %.2f s; remote processes before %d, after %d (%.2f s after the signal)" % (
        signal.Signals(signum).name, took, len(before), len(after), cleared))
    assert proc.returncode == code, err
    assert took < 10
    assert len(before) >= 3   # the runner, the child's shell and its sleep were running
    assert after == [], "left on the host: %s" % after
    run_dir = next(reports.glob("runs/*"))
    run = json.loads((run_dir / "run.json").read_text())
    assert run["interrupted"] is True and run["signal"] == signal.Signals(signum).name
    statuses = {h["name"]: h["status"] for h in run["hosts"]}
    assert statuses["slow"] == "interrupted" and statuses["h0"] != "interrupted"
    assert json.loads((run_dir / "hosts" / "h0.json").read_text())["name"] == "h0"


def test_a_killed_gpudiag_still_ends_the_remote_runner(sshd_fleet, tmp_path):
    """SIGKILL gives gpudiag no chance to close anything: the dropped connection alone ends the host's side."""
    proc, reports, runners, children = start_scan(sshd_fleet, tmp_path)
    try:
        before = left_on_host(pids(runners), pids(children))
        _, cleared, _ = stop_and_measure(proc, signal.SIGKILL, lambda: not left_on_host(pids(runners), pids(children)))
        after = left_on_host(pids(runners), pids(children))
    finally:
        cleanup(proc, pids(runners), pids(children))
    print("scan SIGKILL: remote processes before %d, after %d (%.2f s after the signal)" % (
        len(before), len(after), cleared))
    assert len(before) >= 3 and after == [], "left on the host: %s" % after


def test_sigterm_to_the_runner_on_the_host_takes_its_children_with_it(sshd_fleet, tmp_path):
    """An operator's `kill` of the runner on the host: its hung child's group goes too, and the host reads as
    killed by SIGTERM while the scan goes on to its normal end."""
    proc, reports, runners, children = start_scan(sshd_fleet, tmp_path)
    try:
        [runner] = pids(runners)
        os.kill(runner, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        after = left_on_host([runner], pids(children))
    finally:
        cleanup(proc, pids(runners), pids(children))
    assert after == [], "left on the host: %s" % after
    assert proc.returncode not in (0, 130, 143), err
    run_dir = next(reports.glob("runs/*"))
    slow = json.loads((run_dir / "hosts" / "slow.json").read_text())
    assert slow["status"] == "probe_killed" and "SIGTERM" in slow["reason"], slow["reason"]


@pytest.mark.parametrize("signum, code", SIGNALS)
def test_a_stopped_bench_ends_the_remote_load_at_once(sshd_fleet, tmp_path, standin, signum, code):  # noqa: F811
    fleet = sshd_fleet
    python, runners, _ = recording_python(fleet, tmp_path, "bench", "exit 3")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], extra={"h0": {"python": python}})
    log = tmp_path / "server" / "server.log"
    reports = tmp_path / "reports"
    proc = subprocess.Popen(fleet.gpudiag_argv() + ["bench", "-i", str(inventory), "all", "--concurrency", "2",
                                                    "--requests", "100000", "--max-seconds", "60"],
                            env=fleet.env(GPUDIAG_REPORTS=str(reports)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(fleet.home))
    try:
        assert wait_until(lambda: log.read_text().count("\n") >= 20, 60, proc), "the load never started"
        before = left_on_host(pids(runners), [])
        took, cleared, err = stop_and_measure(proc, signum, lambda: not left_on_host(pids(runners), []))
        after = left_on_host(pids(runners), [])
        time.sleep(1.0)   # requests already in flight are answered
        answered = log.read_text().count("\n")
        time.sleep(1.5)
        sent_after = log.read_text().count("\n") - answered
    finally:
        cleanup(proc, pids(runners), [])
    print("bench %s: exit after %.2f s; remote runners before %d, after %d (%.2f s after the signal); requests "
          "answered 1-2.5 s after the stop %d" % (signal.Signals(signum).name, took, len(before), len(after),
                                                   cleared, sent_after))
    assert proc.returncode == code, err
    assert took < 10
    assert len(before) == 1 and after == [], "the remote runner %s lives on" % after
    assert sent_after == 0                     # the load on the host ended with the command
    run = json.loads(next(reports.glob("runs/*/run.json")).read_text())
    assert run["kind"] == "bench" and run["interrupted"] is True


def test_a_stopped_repro_ends_the_remote_runner_and_its_hung_child(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    slow, runners, children = recording_python(fleet, tmp_path, "slow", "sleep 600")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", [], variants={"slow": ("h1", {"python": slow})})
    reports = tmp_path / "reports"
    code, err, took, cleared, before, after = stop_while_the_child_hangs(
        fleet.gpudiag_argv() + ["repro", "cuda-graph-crash", "-i", str(inventory), "all", "--batch-sizes", "1",
                                "--draft-tokens", "2", "--timeout", "120"],
        fleet.env(GPUDIAG_REPORTS=str(reports)), runners, children, cwd=str(fleet.home), signum=signal.SIGTERM)
    print("repro SIGTERM: exit after %.2f s; remote processes before %d, after %d (%.2f s after the signal)" % (
        took, len(before), len(after), cleared))
    assert code == 143, err
    assert took < 10 and len(before) >= 3 and after == [], "left on the host: %s" % after
    run = json.loads(next(reports.glob("runs/*/run.json")).read_text())
    assert run["kind"] == "repro" and run["interrupted"] is True
