"""Parsed decode/prefill lines -> the server's figures: per-concurrency buckets, graph counts, time span,
ranks, and (with DP attention) the DP ranks' throughput summed at the same second.

Semantics (sglang's metrics code, per release): `accept len` = accepted tokens / verify steps over the
log interval and counts the bonus token, so 1.00 means no draft token accepted. `gen throughput` = tokens
since the previous decode line / wall time since it: idle time counts, so the first decode line after an
idle stretch is no sample of steady decode and stays out of the throughput median (it is counted).
`accept rate` changed meaning between releases: kept as a median of this log only, never compared.
"""
import statistics

BUCKETS = (("0", 0, 0), ("1", 1, 1), ("2-3", 2, 3), ("4-7", 4, 7), ("8-15", 8, 15), ("16-31", 16, 31),
           ("32-63", 32, 63), ("64-127", 64, 127), ("128+", 128, None))
BUCKET_NAMES = tuple(name for name, _, _ in BUCKETS)
# A decode line more than this far after the previous one of its rank follows an idle stretch.
IDLE_GAP_S = 10.0
MAX_RANKS = 64


def bucket_of(running):
    for name, low, high in BUCKETS:
        if running >= low and (high is None or running <= high):
            return name
    return None


def _seconds(record):
    ts = record.get("ts")
    if not ts:
        return None
    h, m, s = (int(x) for x in ts.split(":"))
    day = 0
    if record.get("date"):
        y, mo, d = (int(x) for x in record["date"].split("-"))
        day = (y * 372 + mo * 31 + d)  # monotone in the date, enough to order and to tell a gap
    return day * 86400 + h * 3600 + m * 60 + s


def _rank_key(record):
    return tuple(sorted((record.get("ranks") or {}).items()))


def mark_after_idle(records):
    """Sets record["after_idle"] on decode lines: the first of its rank, the first after a prefill that
    found the server empty (#running-req: 0), or one more than IDLE_GAP_S after its rank's previous line."""
    last, emptied = {}, set()
    for record in records:
        key = _rank_key(record)
        if record["kind"] == "prefill":
            if record.get("running_req") == 0:
                emptied.add(key)
            continue
        now = _seconds(record)
        previous = last.get(key)
        gap = None if previous is None or now is None or previous is None else now - previous
        record["after_idle"] = key not in last or key in emptied or (gap is not None and gap > IDLE_GAP_S)
        last[key] = now if now is not None else last.get(key)
        emptied.discard(key)


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def summarize(records):
    """The figures of one log window (see docs/serving.md for the shape)."""
    mark_after_idle(records)
    decode = [r for r in records if r["kind"] == "decode"]
    prefill = [r for r in records if r["kind"] == "prefill"]
    by_bucket = {}
    for r in decode:
        by_bucket.setdefault(bucket_of(r["running_req"]), []).append(r)
    buckets = {}
    for name in BUCKET_NAMES:
        inside = by_bucket.get(name)
        if not inside:
            continue
        steady = [r for r in inside if not r.get("after_idle")]
        buckets[name] = {"count": len(inside), "steady": len(steady),
                         "median_gen_throughput": _median(r.get("gen_throughput") for r in steady),
                         "median_accept_len": _median(r.get("accept_len") for r in inside)}
    stamped = [r for r in records if r.get("ts")]
    return {
        "decode_lines": len(decode), "prefill_lines": len(prefill), "buckets": buckets,
        "median_accept_len": _median(r.get("accept_len") for r in decode),
        "median_input_throughput": _median(r.get("input_throughput") for r in prefill),
        "accept_len_lines": sum(1 for r in decode if r.get("accept_len") is not None),
        "median_accept_rate": _median(r.get("accept_rate") for r in decode),
        "graph": {"true": sum(1 for r in decode if r.get("graph") is True),
                  "false": sum(1 for r in decode if r.get("graph") is False),
                  "absent": sum(1 for r in decode if "graph" not in r)},
        "graph_on_max_running": max((r["running_req"] for r in decode if r.get("graph") is True), default=None),
        "graph_off_min_running": min((r["running_req"] for r in decode if r.get("graph") is False), default=None),
        "graph_backends": sorted(set(r["graph_backend"] for r in decode if r.get("graph_backend"))),
        "after_idle": sum(1 for r in decode if r.get("after_idle")),
        "nonfinite": sum(r.get("nonfinite", 0) for r in records),
        "first_ts": _stamp(stamped[0]) if stamped else None,
        "last_ts": _stamp(stamped[-1]) if stamped else None,
        "ranks": _ranks(records),
        "dp_sum": dp_sum(decode),
    }


def _stamp(record):
    return ("%s %s" % (record["date"], record["ts"])) if record.get("date") else record["ts"]


def _ranks(records):
    seen = sorted(set(" ".join("%s%d" % kv for kv in (r.get("ranks") or {}).items()) for r in records))
    return [name for name in seen if name][:MAX_RANKS]


def dp_sum(decode):
    """With DP attention each DP rank logs its own decode line: the server's rate is their sum. Lines of
    the same second are summed per DP rank (one line per rank and second); None without DP rank tags."""
    tagged = [r for r in decode if "DP" in (r.get("ranks") or {})]
    if not tagged:
        return None
    dp_ranks = sorted(set(r["ranks"]["DP"] for r in tagged))
    with_dp = [r for r in tagged if r.get("ts") and r.get("gen_throughput") is not None and not r.get("after_idle")]
    by_second = {}
    for r in with_dp:
        by_second.setdefault(_stamp(r), {})[r["ranks"]["DP"]] = r
    full = [lines for lines in by_second.values() if len(lines) == len(dp_ranks)]
    sums = [sum(r["gen_throughput"] for r in lines.values()) for lines in full]
    running = [sum(r["running_req"] for r in lines.values()) for lines in full]
    per_rank = [_median(r["gen_throughput"] for r in with_dp if r["ranks"]["DP"] == rank) for rank in dp_ranks]
    per_rank = [m for m in per_rank if m is not None]
    return {"how": "sum of the DP ranks' gen throughput at the same second", "dp_ranks": len(dp_ranks),
            "seconds_with_all_ranks": len(full), "median_gen_throughput": _median(sums),
            "median_running_req": _median(running),
            "sum_of_rank_medians": round(sum(per_rank), 3) if len(per_rank) == len(dp_ranks) else None}
