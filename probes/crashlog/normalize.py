"""Turns raw log text into numbered logical lines, each tagged with the stream (rank) that wrote it.

Handles CRLF, ANSI colour codes, tqdm's carriage-return redraws, the collectors' prefixes (prefixes.py:
docker compose, podman, kubectl, journald, CRI files, Ray actors, logging formats) and the prefixes sglang
puts before each record: `[2026-01-02 03:04:05 TP3]`, `[... DP0 TP0 EP0]`, 0.2-0.3's `[03:04:05 TP3]`,
`[rank3]:`.
"""
import re

from probes.crashlog import prefixes

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A record header of sglang's logger: the timestamp (no date before 0.3.6), then the ranks of the process.
SGLANG_HEADER = re.compile(r"^\[((?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d)((?: (?:TP|DP|PP|EP|CP|ATTN_DP)\d+)*)\] ?")
RANK_PREFIX = re.compile(r"^\s*(?:\[\d+\] )?\[rank(\d+)\]:")
MAX_LINE = 4000


class Line(object):
    __slots__ = ("number", "stream", "text", "header", "shown")

    def __init__(self, number, stream, text, header, shown=None):
        self.number = number      # 1-based line number in the input, as an editor shows it
        self.stream = stream      # "TP0", "rank3", "SGLangEngine:952" or "" (the main process)
        self.text = text          # the line without its prefixes, colours or redrawn progress
        self.header = header      # True when the line opened a new log record
        self.shown = text if shown is None else shown   # the whole line as a terminal shows it, prefixes kept

    def __repr__(self):
        return "Line(%d, %r, %r)" % (self.number, self.stream, self.text)


def clean(raw):
    """One physical line as a terminal would finally show it: tqdm's last redraw, no colours."""
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if p.strip()]
        raw = parts[-1] if parts else ""
    raw = ANSI.sub("", raw)
    return CONTROL.sub("", raw)[:MAX_LINE]


def _rank_of(ranks):
    names = ranks.split()
    tp = [n for n in names if n.startswith("TP")]
    return (tp or names or [""])[0]


def logical_lines(text):
    """Every line of `text` as a Line; continuation lines inherit the stream of the record they follow."""
    out = []
    current = {"": ""}   # wrapper stream -> rank of the last record header seen in it
    physical = text.replace("\r\n", "\n").split("\n")
    if physical and physical[-1] == "":
        physical.pop()            # the newline that ends the last line does not start another
    for number, raw in enumerate(physical, 1):
        shown = clean(raw)
        line, wrapper = prefixes.strip(shown)
        header = False
        match = RANK_PREFIX.match(line)
        if match:
            stream = "rank" + match.group(1)
            line = line[match.end():].lstrip(" ")
            header = True
        else:
            match = SGLANG_HEADER.match(line)
            if match:
                current[wrapper] = _rank_of(match.group(2))
                line = line[match.end():]
                header = True
            stream = current.get(wrapper, "")
        if wrapper:
            stream = wrapper + ("/" + stream if stream else "")
        out.append(Line(number, stream, line, header, shown))
    return out


# Characters no text log holds: NUL, C0 controls other than tab, newline, CR, ESC and backspace, and the
# replacement character invalid UTF-8 decodes to.
NOT_TEXT = re.compile("[\x00-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\ufffd]")
NOT_TEXT_SHARE = 0.10


def not_text(text):
    """Why `text` is not a text log (binary, NUL-filled, mostly invalid UTF-8), or None. NULs before the
    first line are skipped: a log truncated under a writer that keeps its offset (logrotate's copytruncate)
    starts with a hole of NULs and is text after it."""
    body = text.lstrip("\x00")
    if text and not body:
        return "only NUL bytes (%d)" % len(text)
    bad = NOT_TEXT.subn("", body)[1]
    if body and bad > NOT_TEXT_SHARE * len(body):
        return "%d%% of it is NUL, control bytes or invalid UTF-8" % (100 * bad // len(body))
    return None
