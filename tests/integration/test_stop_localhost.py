"""A stop that stops on `localhost` too: SIGINT to `gpudiag scan localhost` while the env probe's torch child hangs
ends the command at once and leaves no process of the runner or of the child's group (the child here is a shell
that hangs before any Python starts, so only the runner can end it). Checked by the PIDs the interpreter
wrapper writes into the test's directory."""
import os
import signal
import subprocess
import sys
import time

from tests.integration.test_stop_over_ssh import cleanup, left_on_host, pids, wait_until


def test_a_stopped_localhost_scan_ends_the_runner_and_its_hung_child(tmp_path):
    runners, children = tmp_path / "runners.pids", tmp_path / "children.pids"
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nif [ "$1" = "-I" ]; then echo $$ >> %s; exec %s "$@"; fi\necho $$ >> %s\n'
                      'sleep 600\n' % (runners, sys.executable, children))
    python.chmod(0o755)
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "env", "--python",
                             str(python), "--reports-dir", str(tmp_path / "reports"), "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, GPUDIAG_PROC_ROOT=str(empty_proc)))
    try:
        assert wait_until(lambda: pids(children), 60, proc), "the torch child never started"
        before = left_on_host(pids(runners), pids(children))
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
        wait_until(lambda: not left_on_host(pids(runners), pids(children)), 5.0)
        cleared = time.monotonic() - sent
        after = left_on_host(pids(runners), pids(children))
    finally:
        cleanup(proc, pids(runners), pids(children))
    print("localhost SIGINT: exit after %.2f s; processes before %d, after %d (%.2f s after the signal)" % (
        took, len(before), len(after), cleared))
    assert proc.returncode == 130, err
    assert took < 10 and len(before) >= 3
    assert after == [], "left behind: %s" % after
