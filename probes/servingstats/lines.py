"""The `Decode batch` / `Prefill batch` lines of an sglang scheduler log -> one row of figures per line
(rows.py), in one pass over the text, with the start-up lines that split it into windows (one per server run).

Formats differ per release (read from the wheels' scheduler / metrics_reporter modules): the head is
`Decode batch.` up to 0.5.3, `Decode batch [N],` in 0.5.4 and with SGLANG_LOG_FORWARD_ITERS, `Decode batch,`
from 0.5.5; the fields after it are `key: value` pairs joined by ", " whose set and order change. Each figure
is found by its key (str.find: C speed, about twice a regex alternation over the line) wherever it stands: a
key glued to the previous field by the terminal (`token usaccept rate: 0.32`) is still found, `block accept
len` is never read as `accept len`, and a new field never breaks a line. The text is split into lines once; a
line without "batch" costs one substring test. The common forms are read first by one regex match
(strict.py), to the same figures; what it does not match is read here key by key.

What comes before the head is the logging prefix: sglang's "[%(asctime)s{.ms}{ DPn}{ PPn}{ TPn}{ EPn}] "
(rank tags read by shape: DP, PP, TP, EP, ATTN_CP, MOE_DP, ...), a custom format such as "[DP3 TP3 EP3
scheduler_metrics_mixin.py:222] ", a line that lost its "[", or any of these behind a docker compose
("svc-1  | "), Ray ("(SchedulerActor pid=12) "), journald or `> ` quoting prefix, with ANSI colour
(prefix.py: each prefix parsed once and cached, lines of one second and rank share it).
"""
import re

from probes.server_ready import READY
from probes.servingstats.prefix import stamp
from probes.servingstats.rows import row_of
from probes.servingstats.strict import strict_reader


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MAX_LINE = 4096

def _keys(*keys):
    """(key as printed, its length, name, type) per figure read; everything else in a line is skipped."""
    return tuple((key, len(key), name, kind) for key, name, kind in keys)


# #running-req and gen throughput of decode lines are read inline (every decode line has them). Read only when a line says "accept " (speculation on): a baseline's line costs no search for them.
SPEC_KEYS = _keys(("accept len: ", "accept_len", float), ("accept rate: ", "accept_rate", float))
BLOCK_KEYS = _keys(("cap len: ", "cap_len", float), ("block accept len: ", "block_accept_len", float))
PREFILL_KEYS = _keys(("#running-req: ", "running_req", int), ("#new-token: ", "new_token", int),
                     ("input throughput (token/s): ", "input_throughput", float))
BLOCK = "block accept len: "  # 0.5.23 prints it and cap len after accept rate, each only when non-zero
GRAPH = " graph: "  # "<backend> graph: True|False" (cuda, cpu, npu, musa, ...)
# Every launch prints its resolved arguments first (`logger.info(f"{server_args=}")`, 0.2.15-0.5.23): that
# line starts a server run, as does the crash reader's "server is up" line (READY) when a log lost the first.
# The capture line names the decode batch sizes captured as graphs.
START = "server_args=ServerArgs("
CAPTURE = re.compile(r"Capture (?:cuda|cpu|npu) graph bs \[([\d,\s]*)\]")
MAX_ARGS_LINE = 100000
ARG = re.compile(r"\b(decode_log_interval|cuda_graph_max_bs|disable_cuda_graph)=(\w+)")


def parse_line(raw, prefixes=None):
    """{kind, ts, date, t, ranks, rank, running_req, gen_throughput, accept_len, graph, ...} or None when the
    line is not a decode or prefill line. Non-finite numbers (nan, inf) are kept as None and counted."""
    if "batch" not in raw:
        return None
    return _fields(raw, {} if prefixes is None else prefixes)


def _numbers(line, start, keys, record):
    """Sets record[name] for each (key, length, name, type) found in line[start:]; False when none was."""
    find, found = line.find, False
    for key, length, name, convert in keys:
        at = find(key, start)
        if at < 0:
            continue
        if name == "accept_len" and line[at - 6:at] == "block ":
            at = find(key, at + length)  # "block accept len" came first: the next one
            if at < 0:
                continue
        at += length
        end = find(",", at)
        try:
            number = convert(line[at:end] if end >= 0 else line[at:])
        except ValueError:
            continue
        if number - number:  # nan or inf (x - x is nan for both, 0 for every finite number)
            record["nonfinite"] += 1
            number = None
        record[name] = number
        found = True
    return found


def _record(line, prefixes):
    """The row (rows.py) of a stats line read key by key, or None when it is no stats line."""
    record = _fields(line, prefixes)
    return None if record is None else row_of(record)


def _fields(line, prefixes):
    if len(line) > MAX_LINE:
        line = line[:MAX_LINE]
    if "\x1b" in line:
        line = ANSI.sub("", line)
    find = line.find
    begins = find("Decode batch")
    if begins >= 0:
        decode, end = True, begins + 12
    else:
        begins = find("Prefill batch")
        if begins < 0:
            return None
        decode, end = False, begins + 13
    counter = None
    if line.startswith(" [", end):
        close = find("]", end)
        if close < 0 or not line[end + 2:close].isdigit():
            return None
        counter, end = int(line[end + 2:close]), close + 1
    while line.startswith(" ", end):
        end += 1
    if line[end:end + 1] not in (",", "."):
        return None
    start = end + 1
    record = {"kind": "decode" if decode else "prefill", "forward_ct": counter, "nonfinite": 0}
    if decode:
        if not _decode_figures(line, start, record):
            return None
    else:
        _numbers(line, start, PREFILL_KEYS, record)
        # Prefill lines of NPU builds (or a terminal's overwrite) may print no #running-req: known by new tokens.
        if "running_req" not in record and "new_token" not in record:
            return None
    graph = find(GRAPH, start)
    if graph > 0:
        flag = line[graph + 8:graph + 13]
        if flag.startswith("True") or flag.startswith("False"):
            record["graph"] = flag[0] == "T"
            record["graph_backend"] = "cuda" if line[graph - 5:graph] == " cuda" else \
                line[max(line.rfind(" ", 0, graph), line.rfind(",", 0, graph)) + 1:graph]
    return stamp(record, line, begins, prefixes)


def _decode_figures(line, start, record):
    """A decode line's figures into `record`: #running-req and gen throughput read inline (every decode line has
    them), the speculation keys only when the line says "accept "; False when it is no stats line."""
    find = line.find
    at = find("#running-req: ", start)
    if at < 0:
        return False  # a sentence that merely mentions a batch is no stats line
    end = find(",", at + 14)
    try:
        record["running_req"] = int(line[at + 14:end] if end >= 0 else line[at + 14:])
    except ValueError:
        return False
    at = find("gen throughput (token/s): ", start)
    if at >= 0:
        end = find(",", at + 26)
        try:
            number = float(line[at + 26:end] if end >= 0 else line[at + 26:])
            if number - number:  # nan or inf (x - x is nan for both, 0 for every finite number)
                record["nonfinite"] += 1
                number = None
            record["gen_throughput"] = number
        except ValueError:
            pass
    if "accept " in line and _numbers(line, start, SPEC_KEYS, record) and ("cap len: " in line or BLOCK in line):
        _numbers(line, start, BLOCK_KEYS, record)
    return True


def scan(text):
    """(rows, windows) of a log text in one pass: the stats lines' rows (rows.py) in order, and per server run found
    (split at its start-up line) {first: index of its first record, args: {decode_log_interval, ...} from its
    server_args line, captured_max_bs: from its `Capture cuda graph bs [...]` line}."""
    records, prefixes = [], {}
    windows = [{"first": 0, "args": {}, "captured_max_bs": None, "started": False}]
    append, strict = records.append, strict_reader(prefixes)
    for line in text.splitlines():
        if "batch" in line:
            record = strict(line)  # the common forms in one match each, the rest key by key
            if record is None:
                record = _record(line, prefixes)
                if record is None:
                    continue
            append(record)
        elif START in line or "graph bs [" in line or READY.search(line):
            _event(line[:MAX_ARGS_LINE], windows, len(records))
    return records, windows


def _event(line, windows, count):
    window = windows[-1]
    captured = CAPTURE.search(line)
    if captured:
        sizes = [int(v) for v in re.findall(r"\d+", captured.group(1))]
        window["captured_max_bs"] = max(sizes) if sizes else window["captured_max_bs"]
        return
    if START not in line and not READY.search(line):
        return
    if window["first"] < count:  # stats lines since the last start-up: a new server run
        window = {"first": count, "args": {}, "captured_max_bs": None, "started": True}
        windows.append(window)
    window["started"] = True
    if START in line:
        window["args"].update(_args(line))


def _args(line):
    out = {}
    for key, value in ARG.findall(line):
        if value.isdigit():
            out[key] = int(value)
        elif value in ("True", "False"):
            out[key] = value == "True"
    return out
