"""The part of a log's tail worth reading, bounded by lines as well as bytes: a long run of blank lines (64 or
more, which no logger writes) becomes one blank line, and at most MAX_LINES are kept, the newest. A tail of
8 MiB of empty lines becomes nothing to read, and a tail of one-character lines costs MAX_LINES lines, not
millions. Short blank runs stay, so the line numbers a crash is quoted with are the log's own.
Standard library only (runs on hosts too)."""
import re

MAX_LINES = 100000
LONG_BLANK_RUN = 64
_LONG_BLANKS = re.compile(r"\n(?:[ \t\r\f\v]*\n){%d,}" % LONG_BLANK_RUN)  # one match a long run: C speed


def last_lines(text, max_lines=MAX_LINES):
    """(the last `max_lines` lines of `text` with long blank runs collapsed, whether lines were left out)."""
    kept = text.replace("\r\n", "\n")
    if "\n" * LONG_BLANK_RUN in kept or "\n \n" in kept or "\n\t\n" in kept:
        kept = _LONG_BLANKS.sub("\n\n", kept)
    fewer = kept != text.replace("\r\n", "\n")
    end = "\n" if kept.endswith("\n") else ""
    parts = kept[: len(kept) - len(end)].rsplit("\n", max_lines)
    if len(parts) > max_lines:
        return "\n".join(parts[-max_lines:]) + end, True
    return kept, fewer
