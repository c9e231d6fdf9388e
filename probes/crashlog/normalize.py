"""Turns raw log text into numbered logical lines, each tagged with the stream (rank) that wrote it.

Handles CRLF, ANSI colour codes, tqdm's carriage-return redraws, and the prefixes that sglang and its
launchers put before each record: `[2026-01-02 03:04:05 TP3]`, `[... DP0 TP0 EP0]`, `[rank3]:`,
`(SGLangEngine pid=952, ip=10.0.0.1)` and logging-module wrappers (`2025-03-07 ... - INFO - `).
"""
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A record header of sglang's logger: the timestamp, then the ranks of the process that wrote it.
SGLANG_HEADER = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?: (?:TP|DP|PP|EP|CP|ATTN_DP)\d+)*)\] ?")
RANK_PREFIX = re.compile(r"^(?:\[\d+\] )?\[rank(\d+)\]:")
# Wrappers that prefix every line: Ray actors, a supervising script's own logger, docker compose.
WRAPPER = re.compile(r"^\((?P<actor>[A-Za-z_][\w.]*) pid=(?P<pid>\d+)(?:, ip=[\d.:a-fA-F]+)?\) ?")
PY_LOGGING = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - [\w.]+ - [A-Z]+ - ")
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
        line = shown = clean(raw)
        wrapper = ""
        match = WRAPPER.match(line)
        if match:
            wrapper = "%s:%s" % (match.group("actor"), match.group("pid"))
            line = line[match.end():]
        match = PY_LOGGING.match(line)
        if match:
            line = line[match.end():]
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
