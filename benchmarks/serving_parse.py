"""How fast the serving-figures parser reads 8 MiB of decode lines, against a plain regex pass over the same text.

    python benchmarks/serving_parse.py [--repeat N] [--mib M]

The text is the decode and prefill lines of tests/fixtures/serving (real lines quoted in public sglang issues,
every format from 0.2 to 0.5.x, with the access-log lines between them), repeated to M MiB (default 8, the
window the probe reads). The probe side: probes.servingstats.figures (every line split into its fields,
buckets, medians). The baseline: one compiled regex that pulls #running-req and gen throughput out of each
decode line and nothing else, over the same text. Prints the medians of N runs each and their ratio.
"""
import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from probes.servingstats.figures import figures  # noqa: E402

BASELINE = re.compile(r"Decode batch.*?#running-req: (\d+),.*?gen throughput \(token/s\): ([\d.]+)")


def corpus(mib):
    lines = []
    for path in sorted((ROOT / "tests" / "fixtures" / "serving").glob("*.log")):
        lines += [line for line in path.read_text().splitlines() if not line.startswith("#fixture ")]
    block = "\n".join(lines) + "\n"
    return (block * (mib * 1024 * 1024 // len(block) + 1))[: mib * 1024 * 1024]


def baseline(text):
    return [(int(n), float(t)) for n, t in BASELINE.findall(text)]


def timed(function, text, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mib", type=int, default=8)
    args = parser.parse_args()
    text = corpus(args.mib)
    out = figures(text)
    found = len(baseline(text))
    probe_s, base_s = timed(figures, text, args.repeat), timed(baseline, text, args.repeat)
    print("text: %d MiB, %d lines; decode lines: parser %d, regex %d; prefill lines %d" % (
        args.mib, text.count("\n"), out["decode_lines"], found, out["prefill_lines"]))
    print("parser (probes.servingstats): median %.3f s of %d" % (probe_s, args.repeat))
    print("plain regex pass:             median %.3f s of %d" % (base_s, args.repeat))
    print("ratio parser / regex: %.2f×  (cpu count %s)" % (probe_s / base_s, os.cpu_count()))


if __name__ == "__main__":
    main()
