"""A `sglang.bench_serving` "Serving Benchmark Result" block -> its figures (one dict per block).

The block is printed with "{:<40} {:<10}" rows between a "== Serving Benchmark Result ==" head and a
line of "="; its "Accept length" is the server's lifetime average from DP rank 0 (warm-up included).
"""
import math
import re

HEAD = "Serving Benchmark Result"
ROW = re.compile(r"^\s*([^:]+?):\s+(\S.*?)\s*$")
QUOTE = re.compile(r"^\s*(?:>\s?)+")  # a block quoted in markdown ("> ", "> > ") reads as the block
# Row title (as printed; "reqeuest" is the spelling of older releases) -> key.
KEYS = {"Backend": "backend", "Traffic request rate": "request_rate", "Max request concurrency": "concurrency",
        "Max reqeuest concurrency": "concurrency", "Successful requests": "successful_requests",
        "Benchmark duration (s)": "duration_s", "Total input tokens": "total_input_tokens",
        "Total generated tokens": "total_generated_tokens", "Request throughput (req/s)": "request_throughput",
        "Input token throughput (tok/s)": "input_throughput", "Output token throughput (tok/s)": "output_throughput",
        "Total token throughput (tok/s)": "total_throughput", "Concurrency": "mean_concurrency",
        "Accept length": "accept_length", "Median E2E Latency (ms)": "median_e2e_latency_ms",
        "Median TTFT (ms)": "median_ttft_ms", "Median TPOT (ms)": "median_tpot_ms", "Median ITL (ms)": "median_itl_ms",
        "Mean TTFT (ms)": "mean_ttft_ms", "Mean ITL (ms)": "mean_itl_ms"}
TEXT_KEYS = ("backend",)
MAX_BLOCKS = 64
MAX_ROWS = 80


def parse_bench_blocks(lines):
    """[{output_throughput, concurrency, accept_length, ...}] for every block in `lines` (an iterable)."""
    blocks, current, rows = [], None, 0
    for line in lines:
        if line.lstrip().startswith(">"):
            line = QUOTE.sub("", line)
        if HEAD in line:
            current, rows = {}, 0
            blocks.append(current)
            if len(blocks) > MAX_BLOCKS:
                blocks.pop(0)
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped and set(stripped) == {"="}:
            current = None
            continue
        rows += 1
        if rows > MAX_ROWS:
            current = None
            continue
        found = ROW.match(line)
        if found and found.group(1) in KEYS:
            key = KEYS[found.group(1)]
            current[key] = found.group(2)[:64] if key in TEXT_KEYS else _value(found.group(2))
    return blocks


def _value(text):
    if text == "not set":
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in text else number
