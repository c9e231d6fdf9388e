"""A light local scan against its floor: `python -c "import torch"` in the same interpreter, paired.

    python benchmarks/light_scan_floor.py [--runs 7] [--python PATH]

The light scan imports torch once, in its one torch child (probes/hostinfo/torch_child.py): env's build
facts, the GPU list without nvidia-smi and torch_caps' checks all come from it, so its wall time should sit
near one bare torch import. The two commands run in turn (A B A B ...), each whole process timed from start to
exit, and the ratio is taken pair by pair, so a machine whose speed drifts moves both. Prints per-command
medians and the median paired ratio (target <= 1.2).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the interpreter both commands run under")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="gpudiag-floor-")
    scan = [args.python, "-m", "gpudiag", "scan", "localhost", "--python", args.python,
            "--reports-dir", str(Path(work) / "reports")]
    floor = [args.python, "-c", "import torch"]
    timed(scan, work), timed(floor, work)   # warm-up: the page cache holds torch for both
    pairs = []
    for _ in range(args.runs):
        pairs.append((timed(scan, work), timed(floor, work)))
    scans, floors = [p[0] for p in pairs], [p[1] for p in pairs]
    print(f"light scan        median {statistics.median(scans):.3f} s  (min {min(scans):.3f}, max {max(scans):.3f})")
    print(f"import torch      median {statistics.median(floors):.3f} s  (min {min(floors):.3f}, max {max(floors):.3f})")
    print(f"scan/import torch median paired ratio {statistics.median(a / b for a, b in pairs):.3f} "
          f"over {len(pairs)} pairs (target <= 1.2)")


if __name__ == "__main__":
    main()
