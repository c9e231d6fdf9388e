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

DEFAULT_INTERVAL = 40
DEFAULT_SOURCE = "sglang's default (40 decode steps in every release read, 0.2.15-0.5.23)"
# "Well beyond": stamps are whole seconds, so a gap is known to +-1 s; the batch also drifts within an interval.
FACTOR = 3.0
SLACK_S = 2.0

STEADY, IDLE, FIRST = "steady", "idle", "first"


def expected_gap(record, interval, throughput=None):
    """Seconds between two lines of the record's rank at `throughput` (the line's own when None)."""
    tput = record.get("gen_throughput") if throughput is None else throughput
    running = record.get("running_req")
    if not tput or tput <= 0 or running is None:
        return None
    accept = record.get("accept_len") or 1.0
    return interval * max(running, 1) * accept / tput


def mark(records, interval, bucket_of):
    """Sets record["state"] (steady | idle | first) and record["bucket"] on every decode line."""
    last, steady_last, emptied = {}, {}, set()
    limit = FACTOR * interval  # gap > FACTOR x interval x running x accept / rate + SLACK_S: after idle
    for record in records:
        key = record["rank"]
        if record["kind"] == "prefill":
            if record.get("running_req") == 0:
                emptied.add(key)
            continue
        running = record["running_req"]
        bucket = record["bucket"] = bucket_of(running)
        previous = last.get(key)
        last[key] = record
        tput = record.get("gen_throughput")
        if key in emptied:
            emptied.discard(key)
            record["state"] = IDLE
            continue
        if previous is None:
            record["state"] = FIRST
            continue
        now, then = record["t"], previous["t"]
        if now is None or then is None or not tput or tput <= 0:
            record["state"] = STEADY  # no stamps or no rate: no gap to judge, and no prefill said it emptied
            continue
        reference = steady_last.get((key, bucket))
        rate = reference["gen_throughput"] if reference is not None and reference["gen_throughput"] > tput else tput
        if now - then > limit * (running if running > 1 else 1) * (record.get("accept_len") or 1.0) / rate + SLACK_S:
            record["state"] = IDLE
        else:
            record["state"] = STEADY
            steady_last[(key, bucket)] = record
