"""How fast the serving-figures parser reads 8 MiB of decode lines, against a plain regex pass over the same text.

    python benchmarks/serving_parse.py [--repeat N] [--mib M]

Two texts of M MiB (default 8, the window the probe reads): the decode and prefill lines of tests/fixtures/serving
(real lines quoted in public sglang issues, every format from 0.2 to 0.5.x, with the access-log lines between
them) repeated, and one real 0.5.x decode line stamped 16 s apart (a high-concurrency window: no two lines
share a logging prefix). The probe side: probes.servingstats.figures (one pass finding every stats line and
its fields by key, then buckets, cadence, medians), and its reading part alone (probes.servingstats.lines.scan).
The baseline: one compiled regex that pulls #running-req and gen throughput out of each decode line and nothing
else, over the same text. The runs alternate (parser, scan, regex, parser, ...) so a machine shared with other
work slows all three alike; each is timed by this process's CPU time (what other work cannot steal) and
by wall time; prints min and median of N runs each and the ratios of the minima.
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
from probes.servingstats.lines import scan  # noqa: E402

BASELINE = re.compile(r"Decode batch.*?#running-req: (\d+),.*?gen throughput \(token/s\): ([\d.]+)")


def corpus(mib):
    lines = []
    for path in sorted((ROOT / "tests" / "fixtures" / "serving").glob("*.log")):
        lines += [line for line in path.read_text().splitlines() if not line.startswith("#fixture ")]
    block = "\n".join(lines) + "\n"
    return (block * (mib * 1024 * 1024 // len(block) + 1))[: mib * 1024 * 1024]


def spaced(mib):
    """A high-concurrency window: one real 0.5.x decode line (sglang PR #22166) stamped 16 s apart, as a server at
    128 requests prints it, so no two lines share a logging prefix (the fixture corpus repeats its stamps)."""
    path = ROOT / "tests" / "fixtures" / "serving" / "sglang_22166_prefill_input_throughput.log"
    line = next(text for text in path.read_text().splitlines() if "Decode batch" in text)
    body = line[line.index("]") + 2:]
    out, second = [], 0
    while (len(out[-1]) + 1 if out else 1) * len(out) < mib * 1024 * 1024:
        out.append("[2026-04-05 %02d:%02d:%02d] %s" % (second // 3600 % 24, second // 60 % 60, second % 60, body))
        second += 16
    return "\n".join(out) + "\n"


def baseline(text):
    return [(int(n), float(t)) for n, t in BASELINE.findall(text)]


def paired(functions, text, repeat, clock):
    """{name: [seconds, ...]} with the functions' runs interleaved, timed by `clock`."""
    times = dict((name, []) for name in functions)
    for _ in range(repeat):
        for name, function in functions.items():
            start = clock()
            function(text)
            times[name].append(clock() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--mib", type=int, default=8)
    args = parser.parse_args()
    for name, text in (("fixture corpus", corpus(args.mib)), ("lines 16 s apart", spaced(args.mib))):
        print("== %s" % name)
        measure(text, args)


def measure(text, args):
    out = figures(text)
    found = len(baseline(text))
    print("text: %d MiB, %d lines; decode lines: parser %d, regex %d; prefill lines %d" % (
        len(text) // (1024 * 1024), text.count("\n"), out["decode_lines"], found, out["prefill_lines"]))
    functions = {"figures": figures, "scan": scan, "regex": baseline}
    # CPU time of this process first: other work on a shared machine steals wall time, not CPU time.
    for clock, what in ((time.process_time, "CPU time"), (time.perf_counter, "wall time")):
        times = paired(functions, text, args.repeat, clock)
        print("%s:" % what)
        for name, label in (("figures", "parser (probes.servingstats.figures)"), ("scan", "reading part (lines.scan)"),
                            ("regex", "plain regex pass")):
            print("  %-38s min %.3f s, median %.3f s of %d" % (label, min(times[name]),
                                                                statistics.median(times[name]), args.repeat))
        print("  ratio parser / regex: %.2f×, reading part / regex: %.2f× (minima; cpu count %s)" % (
            min(times["figures"]) / min(times["regex"]), min(times["scan"]) / min(times["regex"]), os.cpu_count()))


if __name__ == "__main__":
    main()
