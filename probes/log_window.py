"""The part of a log's tail worth reading, bounded by lines as well as bytes: blank lines dropped (they carry
nothing a reader looks for) and at most MAX_LINES kept, the newest. A tail of 8 MiB of empty lines becomes
nothing to read, and a tail of one-character lines costs MAX_LINES lines, not millions.
Standard library only (runs on hosts too)."""
import re

MAX_LINES = 100000
_BLANK_RUN = re.compile(r"\n(?:[ \t\r\f\v]*\n)+")  # one match a run of blank lines: C speed


def last_lines(text, max_lines=MAX_LINES):
    """(the last `max_lines` non-blank lines of `text`, whether lines beyond them were left out)."""
    kept = "\n" + text.replace("\r\n", "\n")
    while "\n\n" in kept:  # empty lines first, halving each run a pass: memcpy speed
        kept = kept.replace("\n\n\n\n", "\n").replace("\n\n", "\n")
    kept = _BLANK_RUN.sub("\n", kept)[1:]  # then lines of spaces
    end = "\n" if kept.endswith("\n") else ""
    parts = kept[: len(kept) - len(end)].rsplit("\n", max_lines)
    if len(parts) > max_lines:
        return "\n".join(parts[-max_lines:]) + end, True
    return kept, False
