"""`repro cuda-graph-crash --log FILE|-`: read a log (its last 8 MiB), classify it, store it as a run of its
own kind ("log", no hosts, never the default report) and say what it shows in plain lines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, BinaryIO

from gpudiag.repro.signatures import classify_log
from probes.log_window import last_lines

TAIL_BYTES = 8 * 1024 * 1024
RUN_KIND = "log"


class LogUnreadable(ValueError):
    """The log cannot be read; the message names it and says why."""


def read_tail(source: str, stdin: BinaryIO | None = None) -> tuple[str, int, bool]:
    """(text, bytes read, whether older lines were cut): the last TAIL_BYTES of a file, or of stdin."""
    if source == "-":
        data = _tail_of_stream(stdin or sys.stdin.buffer)
        text, fewer = last_lines(_decode(data[-TAIL_BYTES:]))
        return text, min(len(data), TAIL_BYTES), len(data) > TAIL_BYTES or fewer
    path = Path(source)
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except IsADirectoryError:
        raise LogUnreadable(f"--log {source}: is a directory") from None
    except OSError as exc:
        raise LogUnreadable(f"--log {source}: cannot read: {exc.strerror or exc}") from None
    cut = size > TAIL_BYTES
    if cut and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]  # the first line is a fragment
    text, fewer = last_lines(_decode(data))  # bounded by lines too: 8 MiB of empty lines is nothing to read
    return text, len(data), cut or fewer


def _tail_of_stream(stream: BinaryIO) -> bytes:
    kept = bytearray()
    while True:
        chunk = stream.read(1 << 20)
        if not chunk:
            return bytes(kept)
        kept += chunk
        if len(kept) > 2 * TAIL_BYTES:
            del kept[: -TAIL_BYTES - 1]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def classify_source(source: str, stdin: BinaryIO | None = None) -> dict[str, Any]:
    """The block stored in run.json under "log" (and printed by --json)."""
    text, read, cut = read_tail(source, stdin)
    result = classify_log(text)
    if result.get("outcome") == "unreadable":  # binary or NUL-filled: never "clean"
        raise LogUnreadable(f"--log {source}: not a text log: {result.get('reason')}")
    return dict(
        result, problem="cuda-graph-crash", source="stdin" if source == "-" else source, bytes_read=read, truncated=cut
    )


def is_crash(block: dict[str, Any]) -> bool:
    return block.get("outcome") in ("known_signature", "unclassified_crash")
