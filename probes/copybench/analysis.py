"""Pure arithmetic on copy_bench measurements: the DMA crossover, speedups, the best strategy, the saving
against what the installed sglang does, and GPUs whose figures stray from their siblings'.
"""
from probes.copybench.timing import percentile

OUTLIER_TOLERANCE = 0.20


def crossover_bytes(sweep):
    """Smallest swept size from which copy_() clearly beats the foreach kernel at every larger size, or None.

    Clearly: copy_()'s p90 below the foreach kernel's p10, so noise cannot make a crossover up.
    """
    rows = sorted((r for r in sweep if r.get("copy_us") is not None and r.get("foreach_us") is not None),
                  key=lambda r: r["bytes"])
    found = None
    for row in reversed(rows):
        if _clearly_faster(row):
            found = row["bytes"]
        else:
            break
    return found


def _clearly_faster(row):
    """copy_()'s slow samples (p90) faster than the foreach kernel's fast ones (p10); medians when a row
    carries no spread."""
    copy_slow = (row.get("copy") or {}).get("p90_us", row["copy_us"])
    foreach_fast = (row.get("foreach") or {}).get("p10_us", row["foreach_us"])
    return copy_slow < foreach_fast


NO_COPY_ENGINE = ("no split on the CPU: there is no copy engine, copy_() and the foreach kernel both run on "
                  "the CPU cores")


def recommended_split(crossover, override=None, cuda=True):
    """(bytes, why): the threshold above which a contiguous tensor should leave the foreach group."""
    if override is not None:
        return int(override), "set by the copy_bench.split_bytes option"
    if not cuda:
        return None, NO_COPY_ENGINE
    if crossover is None:
        return None, ("copy_() never clearly overtook the foreach kernel in the sweep (its p90 below the "
                      "kernel's p10 at every larger size): keep every tensor in the group")
    return crossover, "copy_() clearly beats the foreach kernel (p90 below its p10) from this size on in the sweep"


def _median(entry):
    if not isinstance(entry, dict) or entry.get("status") != "ok":
        return None
    return entry.get("median_us")


def add_speedups(strategies):
    """speedup_vs_loop on every measured strategy, eager and graph (loop's median / the strategy's)."""
    for mode in (None, "graph"):
        base = _median(_mode(strategies.get("loop"), mode))
        for entry in strategies.values():
            timed = _mode(entry, mode)
            median = _median(timed)
            if median is not None:
                timed["speedup_vs_loop"] = round(base / median, 3) if base and median > 0 else None


def _mode(entry, mode):
    if not isinstance(entry, dict):
        return None
    return entry if mode is None else entry.get(mode)


def best_strategy(strategies):
    """The strategy with the lowest eager median among those that copied right."""
    timed = [(m, name) for name, entry in strategies.items() for m in [_median(entry)] if m is not None]
    return min(timed)[1] if timed else None


def saving_vs_installed(strategies, behaviour):
    """(saving_us, baseline): the best strategy against what the installed release does on this path."""
    kind = (behaviour or {}).get("kind", "unknown")
    if kind == "per_tensor":
        strategy, exact = "loop", True
    elif kind == "grouped":
        strategy, exact = "installed", True
        if _median(strategies.get("installed")) is None and not (behaviour or {}).get("hidden_states_separate"):
            strategy, exact = "grouped_foreach", False
    else:
        return None, {"kind": kind, "reason": "what the installed sglang does on this path is unknown "
                                              "(sglang_source did not run or found no sglang)"}
    baseline = _median(strategies.get(strategy))
    best = best_strategy(strategies)
    if baseline is None or best is None:
        return None, {"kind": kind, "strategy": strategy,
                      "reason": "the baseline strategy %s has no verified timing" % strategy}
    saving = round(baseline - _median(strategies[best]), 3)
    return saving, {"kind": kind, "strategy": strategy, "exact": exact, "median_us": baseline,
                    "hidden_states_separate": (behaviour or {}).get("hidden_states_separate")}


def gpu_metrics(gpu):
    """Figures comparable across sibling GPUs: the largest sweep point and per-strategy totals."""
    metrics = {}
    sweep = [r for r in gpu.get("sweep") or [] if r.get("copy_us") is not None]
    if sweep:
        top = max(sweep, key=lambda r: r["bytes"])
        metrics["sweep_copy_us@%d" % top["bytes"]] = top["copy_us"]
        if top.get("foreach_us") is not None:
            metrics["sweep_foreach_us@%d" % top["bytes"]] = top["foreach_us"]
    for name in ("loop", "grouped_foreach"):
        values = [_median((w.get("strategies") or {}).get(name)) for w in gpu.get("workloads") or []]
        if values and all(v is not None for v in values):
            metrics["%s_total_us" % name] = sum(values)
    return metrics


def find_outliers(gpus, tolerance=OUTLIER_TOLERANCE):
    """[{index, metric, value, siblings_median, ratio}] for figures more than `tolerance` off the siblings'."""
    measured = [(g.get("index"), gpu_metrics(g)) for g in gpus if g.get("status") == "ok"]
    if len(measured) < 2:
        return []
    outliers = []
    for index, metrics in measured:
        for metric, value in sorted(metrics.items()):
            others = sorted(m[metric] for i, m in measured if i != index and metric in m)
            if not others:
                continue
            sibling = percentile(others, 50)
            if sibling and sibling > 0 and abs(value / sibling - 1.0) > tolerance:
                outliers.append({"index": index, "metric": metric, "value": round(value, 3),
                                 "siblings_median": round(sibling, 3), "ratio": round(value / sibling, 3)})
    return outliers
