"""A stop that stops on `localhost` too: SIGINT to `gpudiag scan localhost` while the env probe's torch child hangs
ends the command at once and leaves no process of the runner or of the child's group (the child here is a shell
that hangs before any Python starts, so only the runner can end it). Checked by the PIDs the interpreter
wrapper writes into the test's directory."""
import os
import sys

from tests.integration.test_stop_over_ssh import local_recording_python, stop_while_the_child_hangs


def test_a_stopped_localhost_scan_ends_the_runner_and_its_hung_child(tmp_path):
    python, runners, children = local_recording_python(tmp_path)
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    returncode, err, took, cleared, before, after = stop_while_the_child_hangs(
        [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "env", "--python", python,
         "--reports-dir", str(tmp_path / "reports"), "--timeout", "120"],
        dict(os.environ, GPUDIAG_PROC_ROOT=str(empty_proc)), runners, children)
    print("localhost SIGINT: exit after %.2f s; processes before %d, after %d (%.2f s after the signal)" % (
        took, len(before), len(after), cleared))
    assert returncode == 130, err
    assert took < 10 and len(before) >= 3
    assert after == [], "left behind: %s" % after
