"""The replay-copy strategies side by side in one process, as ratios against the per-tensor loop.

    python benchmarks/copy_strategies.py [--device auto|cpu|cuda] [--gpus 0] [--batch-sizes 1,8,32,128]
                                         [--hidden-sizes 4096,7168] [--paths eagle_draft,...] [--samples N]
                                         [--force]

CUDA when available (GPU 0 unless --gpus; an idle check first, as the probe does), else the CPU with the
probe's small CPU defaults. Every strategy is verified against its sources before and after timing.
A ratio is loop's median divided by the strategy's: above 1 means faster than the loop.
"""
import argparse
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from probes import copy_bench  # noqa: E402
from probes.copybench import options  # noqa: E402
from probes.copybench.devices import bench_all  # noqa: E402
from probes import gpu_layer  # noqa: E402

ORDER = ("loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed", "installed")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--gpus", default="0", help="comma-separated CUDA indices (default 0)")
    for name in ("batch-sizes", "hidden-sizes", "paths", "samples"):
        parser.add_argument("--" + name)
    parser.add_argument("--force", action="store_true", help="benchmark a GPU that looks busy")
    return parser.parse_args(argv)


def build(args):
    import torch
    device = copy_bench.choose_device(copy_bench.torch_info(), args.device)
    raw = {key.replace("-", "_"): getattr(args, key.replace("-", "_"))
           for key in ("batch-sizes", "hidden-sizes", "paths", "samples")
           if getattr(args, key.replace("-", "_")) is not None}
    settings, _ = options.resolve(raw, device)
    job = copy_bench.build_job(settings, device, {})
    job.update(force=args.force, budget_s=3600.0)
    if device == "cuda":
        job["gpus"] = [int(g) for g in args.gpus.split(",") if g.strip()]
        job["gpu_policy"] = copy_bench.gpu_policy(gpu_layer.snapshot_here(), [], args.force,
                                                  settings["idle_used_mib"], torch.cuda.device_count())
    return torch, job


def fmt(value, digits=1):
    return "-" if value is None else ("%.*f" % (digits, value))


def print_device(result):
    where = "cpu" if result.get("index") is None else "GPU %s %s" % (result["index"], result.get("name"))
    print("\n## %s: %s %s" % (where, result["status"], result.get("reason") or ""))
    if result["status"] != "ok":
        return {}
    print("sweep (one contiguous tensor): bytes, copy_() us, foreach us, foreach/copy_")
    for row in result["sweep"]:
        ratio = row["foreach_us"] / row["copy_us"] if row.get("copy_us") and row.get("foreach_us") else None
        print("  %10d  %9s  %9s  %5s" % (row["bytes"], fmt(row.get("copy_us"), 2), fmt(row.get("foreach_us"), 2),
                                        fmt(ratio, 2)))
    print("crossover: %s bytes; split used: %s (%s)" % (result["crossover_bytes"], result["recommended_split_bytes"],
                                                       result["split_reason"]))
    ratios = {}
    for w in result["workloads"]:
        print("\n%s  (%d fields, %d bytes)" % (w["name"], len(w["fields"]), w["total_bytes"]))
        if w.get("status") != "ok":
            print("  %s: %s" % (w.get("status"), w.get("reason")))
            continue
        for name in [n for n in ORDER if n in w["strategies"]]:
            t = w["strategies"][name]
            graph = t.get("graph") or {}
            if t["status"] != "ok":
                print("  %-26s %s: %s" % (name, t["status"], t.get("reason")))
                continue
            ratios.setdefault(name, []).append(t["speedup_vs_loop"])
            line = "  %-26s %9s us  p10-p90 %s-%s  cv %.3f  x%s vs loop" % (
                name, fmt(t["median_us"], 2), fmt(t["p10_us"], 2), fmt(t["p90_us"], 2), t["cv"],
                fmt(t["speedup_vs_loop"], 2))
            if graph.get("status") == "ok":
                line += "   graph %s us x%s" % (fmt(graph["median_us"], 2), fmt(graph.get("speedup_vs_loop"), 2))
            print(line + ("  (noisy)" if t.get("noisy") else ""))
            for gate, timed in sorted((t.get("env") or {}).items()):
                print("  %-26s %s=1: %s us, =0: %s us (host: %s)" % (
                    "", gate, fmt((timed.get("on") or {}).get("median_us"), 2),
                    fmt((timed.get("off") or {}).get("median_us"), 2), timed.get("host_value")))
    return ratios


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    torch, job = build(args)
    print("copy strategies on %s, torch %s, foreach copy %s" % (job["device"], torch.__version__,
                                                               hasattr(torch, "_foreach_copy_")))
    for result in bench_all(job):
        ratios = print_device(result)
        if ratios:
            print("\ngeometric mean of the ratio vs loop over %d workloads:" % len(ratios.get("loop", [])))
            for name in [n for n in ORDER if n in ratios]:
                values = [v for v in ratios[name] if v]
                mean = math.exp(sum(math.log(v) for v in values) / len(values)) if values else None
                print("  %-26s x%s" % (name, fmt(mean, 2)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
