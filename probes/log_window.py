"""The part of a log's tail worth reading, bounded by lines as well as bytes: a long run of blank lines (64 or
more, which no logger writes) becomes one blank line, and at most MAX_LINES are kept, the newest. A tail of
8 MiB of empty lines becomes nothing to read, and a tail of one-character lines costs MAX_LINES lines, not
millions. Short blank runs stay, so the line numbers a crash is quoted with are the log's own.
Standard library only (runs on hosts too)."""
import re

MAX_LINES = 100000
LONG_BLANK_RUN = 64
# A run is collapsed in passes of at most _CHUNK lines, each left as LONG_BLANK_RUN empty lines (still a long
# run) until the run is empty lines only: one unbounded regex match over millions of blank lines holds the
# matcher's backtracking state for each (1 GiB for 8 MiB of empty lines), a bounded one a few hundred KiB.
_CHUNK = 4096
_BLANKS = re.compile(r"\n(?:[ \t\r\f\v]*\n){%d,%d}" % (LONG_BLANK_RUN, _CHUNK))
_EMPTY_RUN = re.compile(r"\n{%d,}" % (LONG_BLANK_RUN + 1))  # empty lines only: one repeated character
_WHITE_LINE = re.compile(r"\n[ \t\r\f\v]+\n")
_KEPT_RUN = "\n" * (LONG_BLANK_RUN + 1)


def last_lines(text, max_lines=MAX_LINES):
    """(the last `max_lines` lines of `text` with long blank runs collapsed, whether lines were left out)."""
    kept = text.replace("\r\n", "\n")
    before = len(kept)
    if _WHITE_LINE.search(kept):
        while True:  # each pass shortens a long run to LONG_BLANK_RUN empty lines per _CHUNK of its lines
            size = len(kept)
            kept = _BLANKS.sub(_KEPT_RUN, kept)
            if len(kept) == size:
                break
    if _KEPT_RUN in kept:
        kept = _EMPTY_RUN.sub("\n\n", kept)
    fewer = len(kept) != before
    end = "\n" if kept.endswith("\n") else ""
    parts = kept[: len(kept) - len(end)].rsplit("\n", max_lines)
    if len(parts) > max_lines:
        return "\n".join(parts[-max_lines:]) + end, True
    return kept, fewer
