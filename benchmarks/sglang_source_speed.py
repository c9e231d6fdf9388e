"""How fast sglang_source reads an installed sglang, against parsing every .py file naively, in one run.

    python benchmarks/sglang_source_speed.py [VERSION | SITE_PACKAGES_DIR] [--repeat N]

Default: the sglang 0.5.23 wheel (tests/sglang_wheels.py downloads and unpacks it once). The probe
runs warm (files in the page cache) N times; the baseline reads and ast.parses every .py file of the
same package (sglang/test/ skipped for both) once. Prints both and the ratio.
"""
import argparse
import ast
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from probes.sglang_facts import locate  # noqa: E402
from probes.sglang_source import facts_from_location  # noqa: E402


def naive_parse_all(package_dir):
    """Read and ast.parse every .py file: what a probe without byte prefiltering would do."""
    count = failed = size = 0
    skip = os.path.join(package_dir, "test")
    for folder, dirs, files in os.walk(package_dir):
        if folder == package_dir and "test" in dirs:
            dirs.remove("test")
        for name in files:
            if name.endswith(".py") and not folder.startswith(skip + os.sep):
                with open(os.path.join(folder, name), "rb") as handle:
                    data = handle.read()
                size += len(data)
                count += 1
                try:
                    ast.parse(data)
                except (SyntaxError, ValueError):
                    failed += 1
    return count, size, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", default="0.5.23", help="sglang version or a site-packages dir")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if os.path.isdir(args.target):
        site = args.target
    else:
        from tests.sglang_wheels import SkipWheel, site_packages_for
        try:
            site = str(site_packages_for(args.target))
        except SkipWheel as exc:
            sys.exit("cannot get the wheel: %s" % exc)
    location = locate.find_package([site])
    if location is None:
        sys.exit("no sglang package in %s" % site)
    facts_from_location(location)  # warm the page cache
    probe_times = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        data = facts_from_location(location)
        probe_times.append(time.perf_counter() - began)
    began = time.perf_counter()
    count, size, failed = naive_parse_all(location["package_dir"])
    naive = time.perf_counter() - began
    probe = statistics.median(probe_times)
    print("sglang %s at %s: %d .py files, %.1f MB (sglang/test/ skipped)" % (data["version"], site, count, size / 1e6))
    print("probe (byte prefilter, parse candidates only): median %.3f s, min %.3f s over %d warm runs"
          % (probe, min(probe_times), args.repeat))
    print("  per finder: %s" % ", ".join("%s %.3f" % kv for kv in data["timings_s"].items()))
    print("baseline (read + ast.parse every file): %.3f s, %d files did not parse" % (naive, failed))
    print("ratio baseline / probe: %.1fx" % (naive / probe))


if __name__ == "__main__":
    main()
