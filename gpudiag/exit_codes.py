"""The exit statuses of every gpudiag command, one enum: the CLI exits with them and the verdict computes them, so
it lives below both (the README's exit-code table lists exactly these)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Every status gpudiag exits with; the README's exit-code table lists exactly these."""

    OK = 0  # all hosts ok, every check named on the command line (--deep, --probes, repro) ran, no finding at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on (default: error)
    USAGE = 2  # usage or input error (one line)
    HOSTS_FAILED = 3  # some hosts could not be scanned
    INCOMPLETE = 4  # a check asked for (--deep, --probes, repro) could not run on some host
    INTERNAL = 70  # a bug in gpudiag itself (EX_SOFTWARE), never confused with "error findings"
    HANGUP = 129  # SIGHUP (128 + 1), finished hosts kept
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it), finished hosts kept
    PIPE_CLOSED = 141  # the reader of stdout left (`gpudiag report | head`): 128 + SIGPIPE, quietly
    TERMINATED = 143  # SIGTERM (128 + 15), finished hosts kept
