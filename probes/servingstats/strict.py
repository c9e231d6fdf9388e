"""The common stats lines read by one regex match each: a decode or prefill line as sglang's releases print it,
every field a plain number and every key one of a known set, so each figure stands at one place. Such a line
reads here exactly as lines.py's key-by-key reading would read it (same figures, same prefix parse; the tests
hold the two side by side on every fixture and release format); any other line (ANSI colour, a glued or
unknown key, a nan, a logging prefix with lower-case letters, a repeated key) is no match and goes to lines.py.

Why the keys are a closed set: lines.py takes a figure at the first occurrence of its key, so an unknown key
that merely ends like a read one ("draft accept len") would be read there; here it is no match.
"""
import re

from probes.servingstats.prefix import MAX_PREFIXES, rank_tags, sglang_seconds, when

MAX_STAMPS = 100000  # distinct date-and-time stamps remembered (86,400 a day)
_N = r"\d{1,12}(?:\.\d{1,12})?"  # a plain number: int() / float() read it as lines.py would
_I = r"\d{1,12}"
_USAGE = r"(?:full token usage: %s, swa token usage: %s, |token usage: %s, )" % (_N, _N, _N)
_BACKEND = r"(cuda|npu|cpu|musa) graph: (True|False)"
# sglang's own "[YYYY-MM-DD HH:MM:SS<.ms><tags>] " by its parts, else any prefix without a lower-case letter
# (neither head can stand in it; a prefix naming a program or a service takes lines.py's path).
_PREFIX = (r"(?:\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?:\.\d{1,6})?(?: [A-Z][A-Z_]{0,10}[A-Z]\d{1,4})*)\] "
           r"|([^a-z\x1b]{0,200}))")
# One pattern for both heads, the prefix matched once: no line matches both (each head has lower-case letters, so
# it cannot stand in the other's prefix), so this reads as trying the decode form and then the prefill form.
_DECODE = (
    r"Decode batch(?: \[(" + _I + r")\])?[.,] #running-req: (" + _I + r"), #token: " + _I + ", " +
    _USAGE + r"(?:accept len: (" + _N + r"), (?:accept rate: (" + _N + r"), )?)?"
    r"(?:pre-allocated usage: " + _N + r", (?:#prealloc-req: " + _I + r", #transfer-req: " + _I +
    r", #retracted-req: " + _I + r", )?)?(?:" + _BACKEND + r", )?"
    r"gen throughput \(token/s\): (" + _N + r"), #queue-req: " + _I + r"(?:, #cache_miss: " + _I + r")?,? ?\Z")
_PREFILL = (
    r"Prefill batch[.,] #new-seq: " + _I + r", #new-token: (" + _I + r"), #cached-token: " + _I +
    r", (?:cache hit rate: " + _N + r"%, )?" + _USAGE + r"#running-req: (" + _I + r"), #queue-req: " + _I +
    r"(?:, #pending-token: " + _I + r")?(?:, " + _BACKEND + r")?(?:, input throughput \(token/s\): (" + _N +
    r"))?(?:, " + _BACKEND + r")?,? ?\Z")
STATS = re.compile(_PREFIX + "(?:" + _DECODE + "|" + _PREFILL + ")", re.ASCII)


def strict_reader(prefixes):
    """A function line -> the row (rows.py) lines.py would read from it, or None when the line is not one of the
    common forms (lines.py reads it then). `prefixes` is lines.py's prefix cache; stamps and rank tags of
    sglang's own prefix are parsed once each."""
    stamps, tags = {}, {}
    match = STATS.match

    def read(line):
        m = match(line)
        if m is None:
            return None
        (stamp, tail, other, counter, running, accept, rate, backend, flag, tput,
         new_token, p_running, p_backend, p_flag, p_tput, backend2, flag2) = m.groups()
        if stamp is None:
            t, ranks, rank, stamp = when(line, len(other), prefixes)[2:]
        else:  # as prefix.when reads sglang's own prefix, inline: this runs once per line
            t = stamps.get(stamp)
            if t is None:
                t = _seconds(stamp, stamps)
            ranks, rank = tags.get(tail) or _tags(tail, tags)
        if running is not None:
            return (True, int(running), float(tput), None if accept is None else float(accept),
                    None if rate is None else float(rate), None if flag is None else flag == "True", backend, 0,
                    None, None if counter is None else int(counter), None, None, None, stamp, t, ranks, rank)
        if p_flag is None:  # the first " graph: " of the line is the one read
            p_backend, p_flag = backend2, flag2
        return (False, int(p_running), None, None, None, None if p_flag is None else p_flag == "True", p_backend, 0,
                None if p_tput is None else float(p_tput), None, int(new_token), None, None, stamp, t, ranks, rank)

    return read


def _seconds(stamp, stamps):
    """prefix.sglang_seconds of the stamp, remembered per stamp."""
    if len(stamps) > MAX_STAMPS:
        stamps.clear()
    t = stamps[stamp] = sglang_seconds(stamp)
    return t


def _tags(tail, tags):
    """prefix.rank_tags of what follows sglang's stamp, remembered per tag string."""
    if len(tags) > MAX_PREFIXES:
        tags.clear()
    found = tags[tail] = rank_tags(tail)
    return found
