"""The one entry: the text of a log window -> its serving figures (decode/prefill buckets and any
bench_serving blocks). Used by the deployment probe on the host and by `gpudiag serving --log` offline."""
from probes.servingstats.bench import parse_bench_blocks
from probes.servingstats.buckets import summarize
from probes.servingstats.lines import parse_line

MAX_RECORDS = 200000  # 8 MiB of decode lines is ~40k lines; a bound for a hostile host all the same


def figures(text):
    """{decode_lines, prefill_lines, buckets, median_accept_len, graph, first_ts, last_ts, ranks, dp_sum,
    bench, ...} for one log text."""
    lines = text.splitlines()
    records = []
    for line in lines:
        record = parse_line(line)
        if record is not None:
            records.append(record)
            if len(records) > MAX_RECORDS:
                records.pop(0)
    out = summarize(records)
    out["bench"] = parse_bench_blocks(lines) if "Serving Benchmark Result" in text else []
    return out
