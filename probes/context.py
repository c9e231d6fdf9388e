"""What a probe gets from the runner: options, its time budget, and helpers every probe needs."""
import os
import signal
import subprocess
import time


class Skip(Exception):
    """Raised by a probe that cannot run here (no torch, no GPU, ...); the message is the reason."""


class ProbeContext(object):
    """Per-probe view of the run: options from the control side and shared results of earlier probes."""

    def __init__(self, options=None, results=None, deadline=None, modules=None):
        self.options = dict(options or {})
        # Data of probes that already ran in this run, by name: lets sglang_source read deployment's choice.
        self.results = results if results is not None else {}
        self.deadline = deadline
        # The bundle's module sources, so a probe can start an isolated child running probe code.
        self.modules = modules or {}

    def option(self, name, default=None):
        return self.options.get(name, default)

    def time_left(self, cap=None):
        """Seconds left for this probe (never below 1), optionally capped."""
        left = 3600.0 if self.deadline is None else max(1.0, self.deadline - time.monotonic())
        return min(left, cap) if cap is not None else left


def run_command(argv, timeout=10.0, env=None, input_bytes=None):
    """Run one external command with a timeout; never raises.

    Returns a dict: {"ok", "exit_code", "stdout", "stderr", "error"}. `error` says why it could not
    run (missing binary, timeout) so callers can report "could not collect" with the reason.
    """
    result = {"ok": False, "exit_code": None, "stdout": "", "stderr": "", "error": None}
    try:
        # Own session, so a hung command and anything it started can be killed as a group.
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input_bytes is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    except FileNotFoundError:
        result["error"] = "%s: not found" % argv[0]
        return result
    except OSError as exc:
        result["error"] = "%s: %s" % (argv[0], exc)
        return result
    try:
        out, err = proc.communicate(input_bytes, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            # A process stuck in the kernel (nvidia-smi in D state) may never die: do not wait forever.
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        result["error"] = "%s: no answer within %.0f s" % (argv[0], timeout)
        return result
    result["exit_code"] = proc.returncode
    result["stdout"] = out.decode("utf-8", "replace")
    result["stderr"] = err.decode("utf-8", "replace")
    result["ok"] = proc.returncode == 0
    if proc.returncode != 0:
        tail = result["stderr"].strip().splitlines()[-1:] or ["exit %d" % proc.returncode]
        result["error"] = "%s: exit %d: %s" % (argv[0], proc.returncode, tail[0][:200])
    return result


def which(name):
    """shutil.which without importing shutil's extras; PATH may be minimal on a host."""
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
