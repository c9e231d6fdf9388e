"""`repro cuda-graph-crash --log FILE|-`: read a log (its last 8 MiB), classify it, store it as a run of its
own kind ("log", no hosts, never the default report) and say what it shows in plain lines."""

from __future__ import annotations

import sys
from typing import Any, BinaryIO

from gpudiag.repro.signatures import classify_log
from probes import log_read

TAIL_BYTES = log_read.TAIL_BYTES
RUN_KIND = "log"


class LogUnreadable(ValueError):
    """The log cannot be read; the message names it and says why."""


def read_tail(source: str, stdin: BinaryIO | None = None) -> log_read.LogRead:
    """The last TAIL_BYTES of a file, or of stdin, bounded by lines and by GPUDIAG_LOG_READ_SECONDS too (a FIFO
    no writer opens, a pipe that never ends). Raises LogUnreadable when it cannot be read or nothing came
    before the time ran out."""
    seconds = log_read.read_seconds()
    try:
        if source == "-":
            found = _read_stdin(stdin or sys.stdin.buffer, seconds)
        else:
            found = log_read.read_log(source, seconds)
    except IsADirectoryError:
        raise LogUnreadable(f"--log {source}: is a directory") from None
    except OSError as exc:
        raise LogUnreadable(f"--log {source}: cannot read: {exc.strerror or exc}") from None
    if found.cut == "time" and not found.bytes_read:
        raise LogUnreadable(f"--log {source}: nothing read: {time_cut_line(found)}")
    return found


def time_cut_line(found: log_read.LogRead) -> str:
    """The line that says a read was cut by time, and how to give it longer."""
    return f"{log_read.cut_note(found)} ({log_read.SECONDS_ENV}=SECONDS gives it longer)"


def _read_stdin(stdin: BinaryIO, seconds: float) -> log_read.LogRead:
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # not a descriptor (a test's bytes): read in full, no wait
        return _read_buffer(stdin, seconds)
    return log_read.read_fd(fd, seconds)


def _read_buffer(stream: BinaryIO, seconds: float) -> log_read.LogRead:
    kept = bytearray()
    total = 0
    while chunk := stream.read(1 << 20):
        kept += chunk
        total += len(chunk)
        if len(kept) > 2 * TAIL_BYTES:
            del kept[: -TAIL_BYTES - 1]
    return log_read.finish(bytes(kept[-TAIL_BYTES:]), total > TAIL_BYTES, False, seconds)


def classify_source(source: str, stdin: BinaryIO | None = None) -> dict[str, Any]:
    """The block stored in run.json under "log" (and printed by --json)."""
    found = read_tail(source, stdin)
    result = classify_log(found.text)
    if result.get("outcome") == "unreadable":  # binary or NUL-filled: never "clean"
        raise LogUnreadable(f"--log {source}: not a text log: {result.get('reason')}")
    return dict(
        result,
        problem="cuda-graph-crash",
        source="stdin" if source == "-" else source,
        bytes_read=found.bytes_read,
        truncated=found.truncated,
        **cut_fields(found),
    )


def is_crash(block: dict[str, Any]) -> bool:
    return block.get("outcome") in ("known_signature", "unclassified_crash")


def cut_fields(found: log_read.LogRead) -> dict[str, Any]:
    """`cut` ("time", "bytes", "lines") and, for a read stopped by time, the line that says so."""
    if not found.cut:
        return {}
    return {"cut": found.cut, **({"cut_note": time_cut_line(found)} if found.cut == "time" else {})}
