"""The `Decode batch` / `Prefill batch` lines of an sglang scheduler log -> one dict of figures per line, in one
pass over the text, with the start-up lines that split it into windows (one per server run).

Formats differ per release (read from the wheels' scheduler / metrics_reporter modules): the head is
`Decode batch.` up to 0.5.3, `Decode batch [N],` in 0.5.4 and with SGLANG_LOG_FORWARD_ITERS, `Decode batch,`
from 0.5.5; the fields after it are `key: value` pairs joined by ", " whose set and order change. Each figure
is found by its key in one match over the line's rest, wherever it stands: a key glued to the previous field by
the terminal (`token usaccept rate: 0.32`) is still found, `block accept len` is never read as `accept len`,
and a new field never breaks a line.

What comes before the head is the logging prefix: sglang's "[%(asctime)s{.ms}{ DPn}{ PPn}{ TPn}{ EPn}] "
(rank tags read by shape: DP, PP, TP, EP, ATTN_CP, MOE_DP, ...), a custom format such as "[DP3 TP3 EP3
scheduler_metrics_mixin.py:222] ", a line that lost its "[", or any of these behind a docker compose
("svc-1  | "), Ray ("(SchedulerActor pid=12) "), journald or `> ` quoting prefix, with ANSI colour.
A prefix is parsed once and cached: lines of one second and rank share it.
"""
import math
import re


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# One match per stats line over the whole text: (prefix, Decode|Prefill, forward counter, the fields).
LINE = re.compile(r"^([^\n]*?)(Decode|Prefill) batch(?: \[(\d+)\])?\s*[.,]([^\n]*)", re.M)
STAMP = re.compile(r"(?:(\d{4}-\d\d-\d\d)[ T])?(\d\d):(\d\d):(\d\d)")
RANK = re.compile(r"(?<![\w.])([A-Z][A-Z_]{0,10}[A-Z])(\d{1,4})(?![\w.:])")
MAX_LINE = 4096
MAX_PREFIXES = 4096

# The figures read: key as printed -> name. One alternation of the exact keys, matched wherever they stand
# (a literal alternation: a generic `\w+ graph` would cost 3x); everything else in a line is skipped.
BACKENDS = ("cuda", "cpu", "npu", "musa", "xpu", "hpu")
NAMES = dict([("#running-req", "running_req"), ("#new-token", "new_token"),
              ("gen throughput (token/s)", "gen_throughput"), ("accept len", "accept_len"),
              ("accept rate", "accept_rate"), ("input throughput (token/s)", "input_throughput"),
              ("cap len", "cap_len"), ("block accept len", "block_accept_len")] +
             [(b + " graph", None) for b in BACKENDS])
INTS = ("running_req", "new_token")
FIELD = re.compile(r"(#running-req|#new-token|gen throughput \(token/s\)|input throughput \(token/s\)|"
                   r"block accept len|accept len|accept rate|cap len|(?:%s) graph)\s*: ([^,\s]*)" % "|".join(BACKENDS))
# Every launch prints its resolved arguments first (`logger.info(f"{server_args=}")`, 0.2.15-0.5.23): that
# line starts a server run. The capture line names the decode batch sizes captured as graphs.
START = "server_args=ServerArgs("
MARKERS = (START, "Capture cuda graph bs [", "Capture cpu graph bs [", "Capture npu graph bs [")
MAX_EVENTS = 10000
MAX_ARGS_LINE = 100000
ARG = re.compile(r"\b(decode_log_interval|cuda_graph_max_bs|disable_cuda_graph)=(\w+)")


def parse_line(raw, prefixes=None):
    """{kind, ts, date, t, ranks, rank, running_req, gen_throughput, accept_len, graph, ...} or None when the
    line is not a decode or prefill line. Non-finite numbers (nan, inf) are kept as None and counted."""
    if "batch" not in raw:
        return None
    text = ANSI.sub("", raw[:MAX_LINE]) if "\x1b" in raw else raw[:MAX_LINE]
    found = LINE.search(text)
    return _record(found.groups(), {} if prefixes is None else prefixes) if found else None


def _record(groups, prefixes):
    prefix, kind, counter, rest = groups
    if len(rest) > MAX_LINE:
        rest = rest[:MAX_LINE]
    if "\x1b" in rest:
        rest = ANSI.sub("", rest)
    record = {"kind": "decode" if kind == "Decode" else "prefill",
              "forward_ct": int(counter) if counter else None, "nonfinite": 0}
    for key, value in FIELD.findall(rest):
        name = NAMES[key]
        if name is None:  # "<backend> graph"
            if value == "True" or value == "False":
                record["graph"], record["graph_backend"] = value == "True", key[:-6]
            continue
        try:
            number = float(value) if name not in INTS else int(value)
        except ValueError:
            continue
        if number != number or number in (math.inf, -math.inf):
            record["nonfinite"] += 1
            number = None
        record[name] = number
    # A sentence that merely mentions a batch is no stats line. Prefill lines of NPU builds print no
    # #running-req: a prefill is known by its new tokens.
    if "running_req" not in record and (kind == "Decode" or "new_token" not in record):
        return None
    parsed = prefixes.get(prefix)
    if parsed is None:
        if "\x1b" in prefix:
            prefix = ANSI.sub("", prefix)
        parsed = _prefix(prefix)
        if len(prefixes) > MAX_PREFIXES:
            prefixes.clear()
        prefixes[groups[0]] = parsed
    record["date"], record["ts"], record["t"], record["ranks"], record["rank"] = parsed
    return record


def _prefix(prefix):
    """(date, time, seconds, {tag: n}, "DP0 TP0") of a logging prefix; the rank tags stand in the last bracket
    (or before a "]" whose "[" was lost), after its time stamp."""
    close = prefix.rfind("]")
    tagged = prefix[prefix.rfind("[", 0, close) + 1:close] if close >= 0 else prefix
    stamp = STAMP.search(tagged) or STAMP.search(prefix)
    date = seconds = ts = None
    if stamp:
        date, ts = stamp.group(1), "%s:%s:%s" % stamp.group(2, 3, 4)
        seconds = int(stamp.group(2)) * 3600 + int(stamp.group(3)) * 60 + int(stamp.group(4))
        if date:
            y, mo, d = (int(x) for x in date.split("-"))
            seconds += (y * 372 + mo * 31 + d) * 86400  # monotone in the date: enough to order and to tell a gap
        if stamp.re is STAMP and stamp.string is tagged:
            tagged = tagged[stamp.end():]
    pairs = RANK.findall(tagged)
    ranks = dict((k, int(v)) for k, v in pairs)
    return date, ts, seconds, ranks, " ".join(k + v for k, v in pairs)


def scan(text):
    """(records, windows) of a log text in one pass: the stats lines in order, and per server run found
    (split at its start-up line) {first: index of its first record, args: {decode_log_interval, ...} from its
    server_args line, captured_max_bs: from its `Capture cuda graph bs [...]` line}."""
    records, prefixes = [], {}
    windows = [{"first": 0, "args": {}, "captured_max_bs": None, "started": False}]
    at = 0
    for position, marker in _events(text):
        _records(text, at, position, records, prefixes)
        at = position
        _event(text, position, marker, windows, len(records))
    _records(text, at, len(text), records, prefixes)
    return records, windows


def _records(text, start, end, records, prefixes):
    for groups in LINE.findall(text, start, end):
        if len(groups[0]) > MAX_LINE:
            continue  # a head that far into a line is no logging prefix's
        record = _record(groups, prefixes)
        if record is not None:
            records.append(record)


def _events(text):
    """(position, marker) of every start-up and capture line, in order (str.find: a literal is found at
    memchr speed, where a regex alternation would cost as much as the stats lines)."""
    found = []
    for marker in MARKERS:
        at = text.find(marker)
        while at >= 0 and len(found) < MAX_EVENTS:
            found.append((text.rfind("\n", 0, at) + 1, marker))
            at = text.find(marker, at + len(marker))
    return sorted(found)


def _event(text, position, marker, windows, count):
    end = text.find("\n", position)
    line = text[position:end if end >= 0 else len(text)][:MAX_ARGS_LINE]
    window = windows[-1]
    if marker != START:
        sizes = [int(v) for v in re.findall(r"\d+", line[line.find(marker) + len(marker):].split("]")[0])]
        window["captured_max_bs"] = max(sizes) if sizes else window["captured_max_bs"]
        return
    if window["first"] < count:  # stats lines since the last start-up: a new server run
        window = {"first": count, "args": {}, "captured_max_bs": None, "started": True}
        windows.append(window)
    window["started"] = True
    window["args"].update(_args(line))


def _args(line):
    out = {}
    for key, value in ARG.findall(line):
        if value.isdigit():
            out[key] = int(value)
        elif value in ("True", "False"):
            out[key] = value == "True"
    return out
