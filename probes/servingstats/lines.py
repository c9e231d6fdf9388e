"""One `Decode batch` / `Prefill batch` line of an sglang scheduler log -> a dict of its figures.

Formats differ per release (read from the wheels' scheduler / metrics_reporter modules): the head is
`Decode batch.` up to 0.5.3, `Decode batch [N],` in 0.5.4 and with SGLANG_LOG_FORWARD_ITERS, `Decode batch,`
from 0.5.5; the fields after it are always `key: value` pairs joined by ", " (a trailing ", " in some
releases), whose set and order change. So each figure is found by its exact key at a pair boundary:
`accept len` is never confused with `cap len` or `block accept len`, and a new field never breaks a line.
What comes before the head is the logging prefix ("[date time DP0 TP0 EP0] "), perhaps behind a docker
compose ("svc-1  | "), Ray ("(SchedulerActor pid=12, ip=1.2.3.4) ") or journald prefix, or ANSI colour.
"""
import math
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HEAD = re.compile(r"(Decode|Prefill) batch(?: \[(\d+)\])?\s*[.,]\s*")
# The logging prefix sglang configures: "[%(asctime)s{ DPn}{ TPn}{ EPn}{ PPn}] " (date since 0.3.x).
PREFIX = re.compile(r"\[(?:(\d{4}-\d\d-\d\d)[ T])?(\d\d:\d\d:\d\d)(?:[.,]\d+)?((?:\s+[A-Z][A-Z_]{1,11}\d+)*)\]\s*$")
# Plain python logging ("2025-01-01 10:00:00,123 - name - INFO - ") or an ISO stamp from `docker logs -t`.
PLAIN_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")
RANK = re.compile(r"([A-Z][A-Z_]{1,11}?)(\d+)")
MAX_LINE = 4096

# The figures read (everything else in a line is skipped unconverted: that is most of the parsing time).
FIELDS = {"#running-req": ("running_req", int), "#queue-req": ("queue_req", int), "#new-token": ("new_token", int),
          "gen throughput (token/s)": ("gen_throughput", float),
          "input throughput (token/s)": ("input_throughput", float), "accept len": ("accept_len", float),
          "accept rate": ("accept_rate", float), "cap len": ("cap_len", float),
          "block accept len": ("block_accept_len", float)}


_FIELD_PATTERNS = tuple((key, name, kind, re.compile(r"(?:^|,)\s*" + re.escape(key) + r"\s*:\s*([^,]*)"))
                        for key, (name, kind) in FIELDS.items())
GRAPH = re.compile(r"(?:^|,)\s*(\w+) graph: (True|False)\s*(?:,|$)")


def parse_line(raw):
    """{kind, ts, date, ranks, running_req, gen_throughput, accept_len, graph, ...} or None when the line
    is not a decode or prefill line. Non-finite numbers (nan, inf) are kept as None and counted."""
    if "batch" not in raw:
        return None
    text = ANSI.sub("", raw[:MAX_LINE]) if "\x1b" in raw else raw[:MAX_LINE]
    head = HEAD.search(text)
    if head is None:
        return None
    record = {"kind": head.group(1).lower(), "forward_ct": int(head.group(2)) if head.group(2) else None}
    record.update(_prefix(text[:head.start()]))
    fields, nonfinite = _fields(text[head.end():])
    if "running_req" not in fields:
        return None  # a sentence that merely mentions a batch, not a stats line
    record.update(fields)
    record["nonfinite"] = nonfinite
    return record


def _prefix(prefix):
    found = PREFIX.search(prefix)
    if found:
        ranks = dict((k, int(v)) for k, v in RANK.findall(found.group(3) or ""))
        return {"date": found.group(1), "ts": found.group(2), "ranks": ranks}
    plain = PLAIN_STAMP.search(prefix)
    if plain:
        return {"date": plain.group(1), "ts": plain.group(2), "ranks": {}}
    return {"date": None, "ts": None, "ranks": {}}


def _number(value, kind):
    try:
        number = int(value) if kind is int else float(value)
    except ValueError:
        try:
            number = float(value)
        except ValueError:
            return None, False
    if isinstance(number, float) and not math.isfinite(number):
        return None, True
    return number, False


def _fields(rest):
    """The FIELDS present in `rest`, each found by its exact key at a pair boundary (one C-level search per
    field is several times faster than splitting every pair in Python)."""
    out, nonfinite = {}, 0
    for key, name, kind, pattern in _FIELD_PATTERNS:
        if key not in rest:
            continue
        found = pattern.search(rest)
        if found:
            number, bad = _number(found.group(1).strip(), kind)
            nonfinite += bad
            if number is not None or bad:
                out[name] = number
    if " graph: " in rest:
        graph = GRAPH.search(rest)
        if graph:
            out["graph"] = graph.group(2) == "True"
            out["graph_backend"] = graph.group(1)
    return out, nonfinite
