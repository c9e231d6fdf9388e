"""Parsed decode/prefill lines of one server run -> its figures: per-concurrency buckets, graph counts, time
span, ranks, and (with DP attention) the DP ranks' throughput summed over the same moment.

Semantics (sglang's metrics code, per release): `accept len` = accepted tokens / verify steps over the
log interval and counts the bonus token, so 1.00 means no draft token accepted. `gen throughput` = tokens
since the previous decode line / wall time since it: idle time counts, so a line after an idle stretch is
no sample of steady decode and stays out of the throughput median (it is counted); which lines those are is
judged from the server's own cadence (cadence.py). `accept rate` changed meaning between releases: kept as
a median of this log only, never compared.
"""
import statistics
from collections import Counter
from itertools import islice
from operator import itemgetter

from probes.servingstats import cadence
from probes.servingstats.rows import ACCEPT, BACKEND, GRAPH, INPUT, NONFINITE, RANK, RANKS, RATE, RUNNING, STAMP, T, TPUT

BUCKETS = (("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-7", 4, 7), ("8-15", 8, 15), ("16-31", 16, 31),
           ("32-63", 32, 63), ("64-127", 64, 127), ("128+", 128, None))
BUCKET_NAMES = tuple(name for name, _, _ in BUCKETS)
MAX_RANKS = 64
MAX_RUNNING_VALUES = 512
FEW = 3  # a figure resting on fewer steady lines than this is marked few-sample


_SMALL = tuple(next(name for name, low, high in BUCKETS if low <= n <= (n if high is None else high)) for n in range(128))


def bucket_of(running):
    return _SMALL[running] if 0 <= running < 128 else ("128+" if running >= 128 else None)


class _BucketNames(dict):
    """bucket_of as a table lookup (a call of dict's own, not a Python function's, per decode line)."""

    def __missing__(self, running):
        return bucket_of(running)


_NAMES = _BucketNames(enumerate(_SMALL))


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


class _Bucket(object):
    __slots__ = ("count", "steady", "idle", "no_rate", "steady_tput", "first_tput", "accept")

    def __init__(self):
        self.count = self.steady = self.idle = self.no_rate = 0
        self.steady_tput, self.first_tput, self.accept = [], [], []

    def figures(self):
        """The median over the steady lines; with none, over the ranks' first lines (no gap to judge them by),
        marked few-sample; with neither, no figure and why."""
        sample = self.steady_tput or self.first_tput
        out = {"count": self.count, "steady": self.steady, "median_gen_throughput": _median(sample),
               "median_accept_len": _median(self.accept)}
        if sample and len(sample) < FEW:
            out["few_sample"] = True
        if not self.steady_tput and self.first_tput:
            out["from_first_lines"] = len(self.first_tput)
        if not sample:
            out["why"] = ("%d of %d lines follow an idle stretch (a gap well beyond the server's cadence, or a "
                          "prefill into an empty server)" % (self.idle, self.count)) if self.idle else \
                "%d of %d lines print no gen throughput" % (self.no_rate, self.count)
        return out


class _Tally(object):
    """A run's decode rows (rows.py), with their buckets and states: each bucket's counts in one pass (inline,
    without a call per line), #running-req values, graph flags and rates counted by C-level passes."""
    __slots__ = ("buckets", "running", "graph", "on_max", "off_min", "backends", "rates", "after_idle")

    def __init__(self, decode, names, states):
        buckets, steady, idle = {}, cadence.STEADY, cadence.IDLE
        on_max = off_min = None
        backends = set()
        for row, name, state in zip(decode, names, states):
            tput, accept, on = row[TPUT], row[ACCEPT], row[GRAPH]
            bucket = buckets.get(name)
            if bucket is None:
                bucket = buckets[name] = _Bucket()
            bucket.count += 1  # _Bucket.add, inline: this loop runs once per decode line
            if accept is not None:
                bucket.accept.append(accept)
            if state is steady:
                bucket.steady += 1
                if tput is not None:
                    bucket.steady_tput.append(tput)
            elif state is idle:
                bucket.idle += 1
            elif tput is not None:
                bucket.first_tput.append(tput)
            if tput is None:
                bucket.no_rate += 1
            if on is not None:
                n = row[RUNNING]
                backends.add(row[BACKEND])
                if on is True and (on_max is None or n > on_max):
                    on_max = n
                elif on is False and (off_min is None or n < off_min):
                    off_min = n
        # The first MAX_RUNNING_VALUES distinct values in the order they come, each counted in full.
        running = Counter(map(itemgetter(RUNNING), decode))
        self.running = running if len(running) <= MAX_RUNNING_VALUES else \
            dict(islice(running.items(), MAX_RUNNING_VALUES))
        graph = Counter(map(itemgetter(GRAPH), decode))
        self.graph = {True: graph[True], False: graph[False], None: graph[None]}
        self.buckets, self.on_max, self.off_min, self.backends = buckets, on_max, off_min, backends
        # A nan rate is None and counted, as no rate.
        self.rates = [rate for rate in map(itemgetter(RATE), decode) if rate is not None]
        self.after_idle = len(states) - states.count(steady)


def summarize(rows, interval=cadence.DEFAULT_INTERVAL, max_bs=None):
    """The figures of one server run's rows (rows.py; see docs/serving.md for the shape); `max_bs` is the largest
    captured decode batch size when known ((size, where it was read)): lines above it are counted as eager."""
    decode, names, states, prefill = cadence.mark(rows, interval, _NAMES.__getitem__)
    t = _Tally(decode, names, states)
    buckets, graph = t.buckets, t.graph
    first = next((r[STAMP] for r in rows if r[STAMP]), None)
    last = next((r[STAMP] for r in reversed(rows) if r[STAMP]), None)
    out = {
        "decode_lines": len(decode), "prefill_lines": len(prefill),
        "buckets": dict((name, buckets[name].figures()) for name in BUCKET_NAMES if name in buckets),
        "median_accept_len": _median(a for b in buckets.values() for a in b.accept),
        "median_input_throughput": _median(map(itemgetter(INPUT), prefill)),
        "accept_len_lines": sum(len(b.accept) for b in buckets.values()),
        "median_accept_rate": _median(t.rates),
        "graph": {"true": graph[True], "false": graph[False], "absent": graph[None]},
        "graph_on_max_running": t.on_max, "graph_off_min_running": t.off_min, "graph_backends": sorted(t.backends),
        "after_idle": t.after_idle,
        "nonfinite": sum(map(itemgetter(NONFINITE), rows)),
        "first_ts": first, "last_ts": last,
        "ranks": sorted(rank for rank in set(map(itemgetter(RANK), rows)) if rank)[:MAX_RANKS],
        "dp_sum": dp_sum(decode, states, interval),
        "decode_running": [[n, t.running[n]] for n in sorted(t.running)],
    }
    if max_bs is not None:
        above = [r for r in decode if r[RUNNING] > max_bs[0]]
        out["eager_by_rule"] = {"max_bs": max_bs[0], "from": max_bs[1], "lines": len(above),
                                "logged_graph_true": sum(1 for r in above if r[GRAPH] is True)}
    return out


def dp_sum(decode, states, interval=cadence.DEFAULT_INTERVAL):
    """With DP attention each DP rank logs its own decode line: the server's rate is their sum. Each rank's
    latest steady line holds until its next one is due (its expected gap, +1 s for whole-second stamps); every
    second at which all DP ranks hold a line gives one sum. A short window whose ranks have only their first
    lines is summed from those, marked few-sample. None without DP rank tags. `decode`: the run's decode rows,
    `states`: theirs (cadence.mark)."""
    tagged = [(r, state) for r, state in zip(decode, states) if "DP" in r[RANKS]]
    if not tagged:
        return None
    dp_ranks = sorted(set(r[RANKS]["DP"] for r, _ in tagged))
    usable = [(r, state) for r, state in tagged if r[T] is not None and r[TPUT] is not None]
    sample = [r for r, state in usable if state == cadence.STEADY]
    few = not sample
    sample = sample or [r for r, state in usable if state == cadence.FIRST]
    held, sums, running, seconds = {}, [], [], []   # held: DP rank -> (its latest line, when it stops holding)
    wanted = len(dp_ranks)

    def moment(now):
        """One sum at second `now` when every DP rank's latest line still holds."""
        current = [line for line, until in held.values() if now <= until]
        if len(current) == wanted:
            seconds.append(now)
            sums.append(sum([h[TPUT] for h in current]))
            running.append(sum([h[RUNNING] for h in current]))

    last = len(sample) - 1
    for n, r in enumerate(sample):
        now = r[T]
        held[r[RANKS]["DP"]] = (r, now + (cadence.expected_gap(r, interval) or 0.0) + 1.0)
        if len(held) == wanted and (n == last or sample[n + 1][T] != now):
            moment(now)  # the last line of its second: every rank that printed in it is in
    by_rank = {}
    for r in sample:
        by_rank.setdefault(r[RANKS]["DP"], []).append(r[TPUT])
    per_rank = [_median(values) for values in by_rank.values()]
    out = {"how": "sum of the DP ranks' gen throughput, each rank's latest line while it is current",
           "dp_ranks": len(dp_ranks), "seconds_with_all_ranks": len(seconds), "median_gen_throughput": _median(sums),
           "median_running_req": _median(running),
           "sum_of_rank_medians": round(sum(per_rank), 3) if len(per_rank) == len(dp_ranks) else None}
    if few and seconds:
        out["few_sample"] = True
    return out
