"""The local transport's deadline: the whole process tree is killed, and a descendant that left the
process group cannot hold the run past the deadline by keeping the pipes open."""
import os
import signal
import time

from gpudiag.transports.local import KILL_GRACE_S, LocalTransport


def test_deadline_kills_the_tree_and_keeps_partial_output():
    result = LocalTransport().run(["sh", "-c", "echo started; sleep 30 & sleep 30"], b"", 1)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"started\n"
    assert result.duration_s < 1 + 5


def test_a_descendant_in_another_session_holding_the_pipes_does_not_block_the_deadline():
    script = "echo started; setsid sh -c 'echo $$ >&2; exec sleep 30' & sleep 30"
    started = time.monotonic()
    result = LocalTransport().run(["sh", "-c", script], b"", 1)
    elapsed = time.monotonic() - started
    escaped = [int(word) for word in result.stderr.split() if word.isdigit()]
    for pid in escaped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"started\n" and len(escaped) == 1
    assert elapsed < 1 + 2 * KILL_GRACE_S + 4     # not the escaped child's 30 s (slack for a loaded machine)


def test_a_child_killed_by_a_signal_reports_the_signal_not_an_exit_code():
    import sys

    from gpudiag.transports.exit_signal import describe_kill

    code = "import os, signal, sys; print('partial', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    result = LocalTransport().run([sys.executable, "-c", code], b"", timeout=30)
    assert result.signal == "SIGSEGV" and result.exit_code is None and not result.timed_out
    assert result.stdout == b"partial\n"
    assert describe_kill(result) == "the probe process was killed by SIGSEGV on the host"
    exited = LocalTransport().run([sys.executable, "-c", "raise SystemExit(3)"], b"", timeout=30)
    assert exited.signal is None and exited.exit_code == 3 and describe_kill(exited) is None
