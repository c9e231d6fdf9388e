"""One `Decode batch` / `Prefill batch` line of an sglang scheduler log -> a dict of its figures.

Formats differ per release (read from the wheels' scheduler / metrics_reporter modules): the head is
`Decode batch.` up to 0.5.3, `Decode batch [N],` in 0.5.4 and with SGLANG_LOG_FORWARD_ITERS, `Decode batch,`
from 0.5.5; the fields after it are always `key: value` pairs joined by ", " (a trailing ", " in some
releases), whose set and order change. So the line is split into pairs and figures are taken by exact key:
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
PAIR = re.compile(r"\s*([^:,]+?)\s*:\s*([^,]*?)\s*(?:,|$)")
GRAPH_KEY = re.compile(r"^(\w+) graph$")
MAX_LINE = 4096

INT_FIELDS = {"#running-req": "running_req", "#queue-req": "queue_req", "#token": "tokens",
              "#full token": "tokens", "#new-seq": "new_seq", "#new-token": "new_token",
              "#cached-token": "cached_token", "largest-len": "largest_len", "#prealloc-req": "prealloc_req",
              "#transfer-req": "transfer_req", "#retracted-req": "retracted_req", "#swa token": "swa_tokens",
              "mamba num": "mamba_num"}
FLOAT_FIELDS = {"gen throughput (token/s)": "gen_throughput", "input throughput (token/s)": "input_throughput",
                "accept len": "accept_len", "accept rate": "accept_rate", "cap len": "cap_len",
                "block accept len": "block_accept_len", "token usage": "token_usage",
                "full token usage": "token_usage", "swa token usage": "swa_token_usage",
                "mamba usage": "mamba_usage", "pre-allocated usage": "preallocated_usage"}


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
    out, nonfinite = {}, 0
    for key, value in PAIR.findall(rest):
        if key in INT_FIELDS or key in FLOAT_FIELDS:
            name = INT_FIELDS.get(key) or FLOAT_FIELDS[key]
            number, bad = _number(value, int if key in INT_FIELDS else float)
            nonfinite += bad
            if number is not None or bad:
                out.setdefault(name, number)
            continue
        graph = GRAPH_KEY.match(key)
        if graph and value in ("True", "False"):
            out["graph"] = value == "True"
            out["graph_backend"] = graph.group(1)
    return out, nonfinite
