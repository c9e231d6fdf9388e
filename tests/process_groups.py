"""Ending the processes a test started in their own process groups: by group id, never by name."""

import os
import signal


def end_groups(procs, timeout=10):
    """SIGKILL each process's group (started with start_new_session=True) and reap the process."""
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=timeout)
