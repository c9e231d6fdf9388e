"""The one entry: the text of a log window -> its serving figures (decode/prefill buckets and any
bench_serving blocks). Used by the deployment probe on the host and by `gpudiag serving --log` offline.

A log that spans server restarts holds several runs (split at the start-up lines, lines.scan): the figures
are those of the last run, the live server's; earlier runs are summarised under `earlier_runs`, never
mixed into it (a run with graphs on and one with them off are two servers to compare, not one).
"""
import gc

from probes.servingstats import cadence
from probes.servingstats.bench import parse_bench_blocks
from probes.servingstats.buckets import summarize
from probes.servingstats.lines import scan

MAX_RECORDS = 200000  # 8 MiB of decode lines is ~40k lines; a bound for a hostile host all the same
MAX_EARLIER = 4
EARLIER_KEYS = ("decode_lines", "prefill_lines", "first_ts", "last_ts", "buckets", "graph", "median_accept_len")


def figures(text, args=None):
    """{decode_lines, prefill_lines, buckets, median_accept_len, graph, first_ts, last_ts, ranks, dp_sum,
    cadence, bench, ...} for one log text; `args` are the server's parsed flags when the caller has them
    (decode_log_interval, cuda_graph_max_bs)."""
    # Tens of thousands of line records and no reference cycles: the cyclic collector, left on, walks them
    # again and again and finds nothing (about 8% of the read), so it waits until they are summed.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _figures(text, args)
    finally:
        if enabled:
            gc.enable()


def _figures(text, args):
    records, windows = scan(text)
    if len(records) > MAX_RECORDS:
        drop = len(records) - MAX_RECORDS
        records = records[drop:]
        windows = [dict(w, first=max(0, w["first"] - drop)) for w in windows]
    bounds = [w["first"] for w in windows] + [len(records)]
    runs = [(w, records[bounds[n]:bounds[n + 1]]) for n, w in enumerate(windows)]
    earlier = [_summary(w, lines, args) for w, lines in runs[:-1] if lines]
    window, lines = runs[-1]
    out = _summary(window, lines, args)
    out["runs"] = len(earlier) + 1
    if earlier:
        out["earlier_runs"] = [dict((k, run[k]) for k in EARLIER_KEYS) for run in earlier[-MAX_EARLIER:]]
    out["bench"] = parse_bench_blocks(text.splitlines()) if "Serving Benchmark Result" in text else []
    return out


def _summary(window, lines, args):
    interval, where = _interval(window, args)
    out = summarize(lines, interval, _max_bs(window, args))
    out["cadence"] = {"decode_log_interval": interval, "from": where}
    if window.get("started"):
        out["started_in_log"] = True
    return out


def _interval(window, args):
    logged = window["args"].get("decode_log_interval")
    if isinstance(logged, int) and logged > 0:
        return logged, "the server_args line of the log"
    given = _positive_int((args or {}).get("decode_log_interval"))
    if given:
        return given, "--decode-log-interval"
    return cadence.DEFAULT_INTERVAL, cadence.DEFAULT_SOURCE


def _max_bs(window, args):
    """(largest captured decode batch size, where it was read), or None when neither the log nor the flags say."""
    if window.get("captured_max_bs"):
        return window["captured_max_bs"], "the log's `Capture cuda graph bs` line"
    logged = window["args"].get("cuda_graph_max_bs")
    if isinstance(logged, int) and logged > 0:
        return logged, "cuda_graph_max_bs of the log's server_args line"
    given = _positive_int((args or {}).get("cuda_graph_max_bs"))
    if given:
        return given, "--cuda-graph-max-bs"
    return None


def _positive_int(value):
    """A flag's value as a positive int: parsed flags keep ints for the flags they know and strings for the
    rest (`--decode-log-interval 20` arrives as "20"); None for anything else."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
