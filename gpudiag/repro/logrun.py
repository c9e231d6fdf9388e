"""`repro cuda-graph-crash --log FILE|-`: read a log (its last 8 MiB), classify it, store it as a run of its
own kind ("log", no hosts, never the default report) and say what it shows in plain lines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, BinaryIO

from gpudiag.repro.signatures import classify_log

TAIL_BYTES = 8 * 1024 * 1024
RUN_KIND = "log"


class LogUnreadable(ValueError):
    """The log cannot be read; the message names it and says why."""


def read_tail(source: str, stdin: BinaryIO | None = None) -> tuple[str, int, bool]:
    """(text, bytes read, whether older lines were cut): the last TAIL_BYTES of a file, or of stdin."""
    if source == "-":
        data = _tail_of_stream(stdin or sys.stdin.buffer)
        return _decode(data[-TAIL_BYTES:]), min(len(data), TAIL_BYTES), len(data) > TAIL_BYTES
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
    return _decode(data), len(data), cut


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


def describe(block: dict[str, Any]) -> list[str]:
    """Plain lines for the terminal: the verdict first, then each crash with its evidence and advice."""
    source, crashes = str(block.get("source")), list(block.get("crashes") or [])
    scope = f"{block.get('lines', 0)} lines" + (" (the last 8 MiB)" if block.get("truncated") else "")
    if not crashes:
        ready = block.get("ready_line")
        came_up = f"the server came up at line {ready}" if ready else "the log does not show the server coming up"
        out = [f"{source}: clean: no crash in {scope}; {came_up}"]
    else:
        kind = "known signature" if block.get("outcome") == "known_signature" else "unclassified crash"
        total = block.get("crashes_total", len(crashes))
        out = [
            f"{source}: {kind}: {total} crash{'es' if total != 1 else ''} in {scope}; advice assumes "
            f"{block.get('advice_assumes')} ({(block.get('release') or {}).get('basis')})"
        ]
    for index, crash in enumerate(crashes, 1):
        detail = f" ({crash['detail']})" if crash.get("detail") else ""
        out.append(f"crash {index}: {crash.get('summary')}")
        out.append(f"  family: {crash.get('family')}{detail}, {crash.get('when')}")
        for quoted in crash.get("quoted") or []:
            out.append(f"  {source}:{quoted.get('line')}: {quoted.get('text')}")
        frames = crash.get("last_frames") or []
        if frames:
            out.append(
                "  last frames: " + " <- ".join(f"{f['file']}:{f['line']} in {f['function']}" for f in reversed(frames))
            )
        signature = crash.get("signature")
        if signature:
            out.append(f"  meaning: {signature.get('meaning')}")
            out.append(f"  advice: {signature.get('recommendation')}")
            out.append(f"  reference: {signature.get('reference')}")
        elif crash.get("family") == "not_a_graph_problem":
            out.append(f"  not a CUDA-graph problem ({crash.get('detail')}): fix it before looking at graphs")
    for note in block.get("notes") or []:
        quoted = (note.get("quoted") or [{}])[0]
        out.append(f"note: {note.get('name')} at line {quoted.get('line')}: {quoted.get('text')}")
    dflash = block.get("dflash_draft_graph")
    if dflash and dflash.get("state") == "disabled":
        out.append(f"DFlash draft graph disabled at startup: {dflash.get('text')} (line {dflash.get('line')})")
    return out


def appendix(extra: dict[str, Any]) -> list[str]:
    """The markdown appendix of a log run: the verdict, then each crash with its numbered lines and advice."""
    from gpudiag.render.blocks import fenced  # render helpers, only when a report is written

    block = extra.get("log")
    if not isinstance(block, dict) or not block.get("outcome"):
        return []
    source = str(block.get("source") or "log")
    lines = ["## Appendix: crash log", "", describe(block)[0].replace(f"{source}: ", f"Log `{source}`: ", 1), ""]
    for index, crash in enumerate(c for c in block.get("crashes") or [] if isinstance(c, dict)):
        lines += [
            f"### Crash {index + 1}: {crash.get('family')}" + (f" ({crash['detail']})" if crash.get("detail") else ""),
            "",
            str(crash.get("summary")),
            "",
        ]
        quoted = [q for q in crash.get("quoted") or [] if isinstance(q, dict)]
        if quoted:
            width = len(str(max(int(q.get("line") or 0) for q in quoted)))
            lines += fenced(
                source,
                quoted[0].get("line"),
                "\n".join(f"{str(q.get('line', '?')).rjust(width)}: {q.get('text', '')}" for q in quoted),
                "text",
            )
        signature = crash.get("signature") or {}
        if signature:
            lines += [
                f"{signature.get('meaning')}",
                "",
                f"**Advice** (assumes {block.get('advice_assumes')}): {signature.get('recommendation')} "
                f"({signature.get('reference')})",
                "",
            ]
    return lines
