"""A classified log for people: plain terminal lines (`repro --log`) and the report's crash-log appendix."""

from __future__ import annotations

from typing import Any

from gpudiag.render.blocks import fenced


def describe(block: dict[str, Any]) -> list[str]:
    """Plain lines for the terminal: the verdict first, then each crash with its evidence and advice."""
    source, crashes = str(block.get("source")), list(block.get("crashes") or [])
    timed = block.get("cut") == "time"
    scope = f"{block.get('lines', 0)} lines" + (" (the last 8 MiB)" if block.get("truncated") and not timed else "")
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
    if timed:  # what was read is not the whole log: a clean verdict is only of what came in time
        out.append(f"{source}: {block.get('cut_note') or 'read stopped by its time limit'}")
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
