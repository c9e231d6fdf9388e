"""The common stats lines read by one regex match each: a decode or prefill line as sglang's releases print it,
every field a plain number and every key one of a known set, so each figure stands at one place. Such a line
reads here exactly as lines.py's key-by-key reading would read it (same figures, same prefix parse; the tests
hold the two side by side on every fixture and release format); any other line (ANSI colour, a glued or
unknown key, a nan, a logging prefix with lower-case letters, a repeated key) is no match and goes to lines.py.

Why the keys are a closed set: lines.py takes a figure at the first occurrence of its key, so an unknown key
that merely ends like a read one ("draft accept len") would be read there; here it is no match.
"""
import re

from probes.servingstats.prefix import MAX_PREFIXES, RANK, day, stamp

MAX_STAMPS = 100000  # distinct date-and-time stamps remembered (86,400 a day)
_N = r"\d{1,12}(?:\.\d{1,12})?"  # a plain number: int() / float() read it as lines.py would
_I = r"\d{1,12}"
_USAGE = r"(?:full token usage: %s, swa token usage: %s, |token usage: %s, )" % (_N, _N, _N)
_BACKEND = r"(cuda|npu|cpu|musa) graph: (True|False)"
# sglang's own "[YYYY-MM-DD HH:MM:SS<.ms><tags>] " by its parts, else any prefix without a lower-case letter
# (neither head can stand in it; a prefix naming a program or a service takes lines.py's path).
_PREFIX = (r"(?:\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)((?:\.\d{1,6})?(?: [A-Z][A-Z_]{0,10}[A-Z]\d{1,4})*)\] "
           r"|([^a-z\x1b]{0,200}))")
DECODE = re.compile(
    _PREFIX + r"Decode batch(?: \[(" + _I + r")\])?[.,] #running-req: (" + _I + r"), #token: " + _I + ", " +
    _USAGE + r"(?:accept len: (" + _N + r"), (?:accept rate: (" + _N + r"), )?)?"
    r"(?:pre-allocated usage: " + _N + r", (?:#prealloc-req: " + _I + r", #transfer-req: " + _I +
    r", #retracted-req: " + _I + r", )?)?(?:" + _BACKEND + r", )?"
    r"gen throughput \(token/s\): (" + _N + r"), #queue-req: " + _I + r"(?:, #cache_miss: " + _I + r")?,? ?\Z",
    re.ASCII)
PREFILL = re.compile(
    _PREFIX + r"Prefill batch[.,] #new-seq: " + _I + r", #new-token: (" + _I + r"), #cached-token: " + _I +
    r", (?:cache hit rate: " + _N + r"%, )?" + _USAGE + r"#running-req: (" + _I + r"), #queue-req: " + _I +
    r"(?:, #pending-token: " + _I + r")?(?:, " + _BACKEND + r")?(?:, input throughput \(token/s\): (" + _N +
    r"))?(?:, " + _BACKEND + r")?,? ?\Z", re.ASCII)


def strict_reader(prefixes):
    """A function line -> the record lines.py would build for it, or None when the line is not one of the
    common forms (lines.py reads it then). `prefixes` is lines.py's prefix cache; stamps and rank tags of
    sglang's own prefix are parsed once each."""
    stamps, tags = {}, {}
    decode, prefill = DECODE.match, PREFILL.match

    def read(line):
        m = decode(line)
        if m is None:
            m = prefill(line)
            return None if m is None else _prefill(m, line, prefixes, stamps, tags)
        date, ts, tail, other, counter, running, accept, rate, backend, flag, tput = m.groups()
        if date is None:
            record = {"kind": "decode", "forward_ct": None if counter is None else int(counter), "nonfinite": 0,
                      "running_req": int(running), "gen_throughput": float(tput)}
            stamp(record, line, len(other), prefixes)
        else:
            t, ranks = _when(line, date, ts, tail, stamps, tags)
            record = {"kind": "decode", "forward_ct": None if counter is None else int(counter), "nonfinite": 0,
                      "running_req": int(running), "gen_throughput": float(tput), "date": date, "ts": ts, "t": t,
                      "ranks": ranks[0], "rank": ranks[1]}
        if accept is not None:
            record["accept_len"] = float(accept)
            if rate is not None:
                record["accept_rate"] = float(rate)
        if flag is not None:
            record["graph"] = flag == "True"
            record["graph_backend"] = backend
        return record

    return read


def _prefill(m, line, prefixes, stamps, tags):
    date, ts, tail, other, new_token, running, backend, flag, tput, backend2, flag2 = m.groups()
    record = {"kind": "prefill", "forward_ct": None, "nonfinite": 0, "running_req": int(running),
              "new_token": int(new_token)}
    if tput is not None:
        record["input_throughput"] = float(tput)
    if flag is None:  # the first " graph: " of the line is the one read
        backend, flag = backend2, flag2
    if flag is not None:
        record["graph"] = flag == "True"
        record["graph_backend"] = backend
    if date is None:
        return stamp(record, line, len(other), prefixes)
    t, ranks = _when(line, date, ts, tail, stamps, tags)
    record["date"], record["ts"], record["t"], record["ranks"], record["rank"] = date, ts, t, ranks[0], ranks[1]
    return record


def _when(line, date, ts, tail, stamps, tags):
    """(seconds, (ranks, rank)) of sglang's own prefix, as prefix.stamp reads it: once per stamp and tag string."""
    t = stamps.get(line[1:20])
    if t is None:
        if len(stamps) > MAX_STAMPS:
            stamps.clear()
        t = stamps[line[1:20]] = day(date) + int(ts[:2]) * 3600 + int(ts[3:5]) * 60 + int(ts[6:])
    ranks = tags.get(tail)
    if ranks is None:
        if len(tags) > MAX_PREFIXES:
            tags.clear()
        pairs = RANK.findall(tail)
        ranks = tags[tail] = (dict((k, int(v)) for k, v in pairs), " ".join(k + v for k, v in pairs))
    return t, ranks
