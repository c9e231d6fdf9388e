"""Which decode lines follow an idle stretch, judged by the server's own cadence, not by a fixed gap.

A rank prints a decode line every `--decode-log-interval` decode steps (40 by default in every release read,
0.2.15 to 0.5.23: a literal `% 40` before 0.3.5, the server_args default from it). Each step produces
#running-req x accept len tokens (accept len counts the bonus token; 1 without speculation), and the line's
gen throughput is the tokens since the rank's previous line over the wall time since it, idle time included.
So the gap expected between two lines of a rank is interval x running x accept / throughput: 16 s for a
DFLASH line at 128 requests, accept 3.6 and 1,146 tok/s; 0.4 s for a small model at concurrency 1.

A line is after idle when its gap is well beyond the cadence its rank had just shown (the faster of the previous
steady line of the same #running-req bucket and the line's own rate), or when it follows a prefill into an empty
server (#running-req 0 on the prefill line). A rank's first line in the window has no gap to judge: it is
"first", kept out of the throughput median unless its bucket has nothing better (then few-sample).
"""
from probes.servingstats.rows import ACCEPT, RANK, RUNNING, T, TPUT

DEFAULT_INTERVAL = 40
DEFAULT_SOURCE = "sglang's default (40 decode steps in every release read, 0.2.15-0.5.23)"
# "Well beyond": stamps are whole seconds, so a gap is known to +-1 s; the batch also drifts within an interval.
FACTOR = 3.0
SLACK_S = 2.0

STEADY, IDLE, FIRST = "steady", "idle", "first"


def expected_gap(row, interval, throughput=None):
    """Seconds between two lines of the row's rank (rows.py) at `throughput` (the line's own when None)."""
    tput = row[TPUT] if throughput is None else throughput
    running = row[RUNNING]
    if not tput or tput <= 0 or running is None:
        return None
    accept = row[ACCEPT] or 1.0
    return interval * max(running, 1) * accept / tput


def mark(rows, interval, bucket_of):
    """(decode rows, their #running-req buckets, their states: steady | idle | first; prefill rows), in the log's
    order."""
    last, steady_last, emptied = {}, {}, set()
    decode, buckets, states, prefill = [], [], [], []
    limit = FACTOR * interval  # gap > FACTOR x interval x running x accept / rate + SLACK_S: after idle
    for row in rows:
        key, running = row[RANK], row[RUNNING]
        if not row[0]:  # a prefill line
            prefill.append(row)
            if running == 0:
                emptied.add(key)
            continue
        decode.append(row)
        bucket = bucket_of(running)
        buckets.append(bucket)
        previous = last.get(key)
        last[key] = row
        if emptied and key in emptied:
            emptied.discard(key)
            states.append(IDLE)
            continue
        if previous is None:
            states.append(FIRST)
            continue
        now, then, tput = row[T], previous[T], row[TPUT]
        if now is None or then is None or not tput or tput <= 0:
            states.append(STEADY)  # no stamps or no rate: no gap to judge, and no prefill said it emptied
            continue
        reference = steady_last.get((key, bucket))
        rate = reference[TPUT] if reference is not None and reference[TPUT] > tput else tput
        if now - then > limit * (running if running > 1 else 1) * (row[ACCEPT] or 1.0) / rate + SLACK_S:
            states.append(IDLE)
        else:
            states.append(STEADY)
            steady_last[(key, bucket)] = row
    return decode, buckets, states, prefill
