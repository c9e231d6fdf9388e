"""Pure arithmetic on copy_bench measurements: the DMA crossover, speedups, the best strategy, the saving
against what the installed sglang does, and GPUs whose figures stray from their siblings'.
"""
from probes.copybench import strategies as names
from probes.copybench.records import BUDGET_SPENT
from probes.copybench.timing import percentile

OUTLIER_TOLERANCE = 0.20


CLOCKS = ("graph", "eager")   # GPU stream (inside a replayed graph) first: the split is a GPU-time question


def sweep_clock(sweep):
    """'graph' when the sweep timed both kernels inside replayed graphs at some size, else 'eager'."""
    for row in sweep:
        if row.get("copy_graph_us") is not None and row.get("foreach_graph_us") is not None:
            return "graph"
    return "eager"


def _side(row, kind, clock):
    """(median, p10, p90) of one kernel of a sweep row in one clock; None where it was not timed."""
    timing = row.get(kind) if isinstance(row.get(kind), dict) else {}
    if clock == "graph":
        timing = timing.get("graph") if isinstance(timing.get("graph"), dict) else {}
        median = row.get(kind + "_graph_us")
    else:
        median = row.get(kind + "_us")
    if median is None:
        return None
    return median, timing.get("p10_us", median), timing.get("p90_us", median)


def crossover_bytes(sweep, clock="eager"):
    """Smallest swept size from which copy_() clearly beats the foreach kernel at every larger size, or None.

    Clearly: copy_()'s p90 below the foreach kernel's p10, so noise cannot make a crossover up. `clock` is
    'eager' (CPU issue: each launch on its own) or 'graph' (GPU stream: inside a replayed graph).
    """
    rows = sorted(((r["bytes"], _side(r, "copy", clock), _side(r, "foreach", clock)) for r in sweep
                   if _side(r, "copy", clock) is not None and _side(r, "foreach", clock) is not None),
                  key=lambda r: r[0])
    found = None
    for size, copy, foreach in reversed(rows):
        if copy[2] < foreach[1]:
            found = size
        else:
            break
    return found


NO_COPY_ENGINE = ("no split on the CPU: there is no copy engine, copy_() and the foreach kernel both run on "
                  "the CPU cores")
CLOCK_WORDS = {"graph": "GPU stream time, inside replayed graphs", "eager": "eager time (no graph replay was timed)"}


def recommended_split(crossover, override=None, cuda=True, clock="eager"):
    """(bytes, why): the threshold above which a contiguous tensor should leave the foreach group."""
    if override is not None:
        return int(override), "set by the copy_bench.split_bytes option"
    if not cuda:
        return None, NO_COPY_ENGINE
    if crossover is None:
        return None, ("copy_() never clearly overtook the foreach kernel in the sweep (%s; its p90 below the "
                      "kernel's p10 at every larger size): keep every tensor in the group" % CLOCK_WORDS[clock])
    return crossover, ("copy_() clearly beats the foreach kernel (p90 below its p10) from this size on in the sweep, "
                       "by %s" % CLOCK_WORDS[clock])


def _median(entry):
    if not isinstance(entry, dict) or entry.get("status") != "ok":
        return None
    return entry.get("median_us")


def add_speedups(strategies):
    """speedup_vs_loop on every measured strategy, eager and graph (loop's median / the strategy's)."""
    for mode in (None, "graph"):
        base = _median(_mode(strategies.get(names.LOOP), mode))
        for entry in strategies.values():
            timed = _mode(entry, mode)
            median = _median(timed)
            if median is not None:
                timed["speedup_vs_loop"] = round(base / median, 3) if base and median > 0 else None


def _mode(entry, mode):
    if not isinstance(entry, dict):
        return None
    return entry if mode is None else entry.get(mode)


def best_strategy(strategies, mode=None):
    """The strategy with the lowest median among those that copied right: eager (mode None) or inside a replayed
    graph (mode 'graph')."""
    timed = [(m, name) for name, entry in strategies.items() for m in [_median(_mode(entry, mode))] if m is not None]
    return min(timed)[1] if timed else None


def saving_vs_installed(strategies, behaviour):
    """(saving_us, baseline): the best strategy against what the installed release does on this path."""
    kind = (behaviour or {}).get("kind", "unknown")
    if kind == "per_tensor":
        strategy, exact = names.LOOP, True
    elif kind == "grouped":
        strategy, exact = names.INSTALLED, True
        if _median(strategies.get(names.INSTALLED)) is None and not (behaviour or {}).get("hidden_states_separate"):
            strategy, exact = names.GROUPED, False
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


def _steady_median(timing):
    """The median of a verified timing whose samples agree (not `noisy`), else None."""
    if not isinstance(timing, dict) or timing.get("status", "ok") != "ok" or timing.get("noisy"):
        return None
    return timing.get("median_us")


def gpu_metrics(gpu):
    """Steady figures comparable across sibling GPUs: the largest sweep point, every workload's strategies,
    host→device copies. Noisy timings are left out: their medians say nothing about the GPU."""
    metrics = {}
    sweep = [r for r in gpu.get("sweep") or [] if r.get("copy_us") is not None]
    if sweep:
        top = max(sweep, key=lambda r: r["bytes"])
        for kind in ("copy", "foreach"):
            value = _steady_median(top.get(kind) or {"median_us": top.get(kind + "_us")})
            if value is not None:
                metrics["sweep_%s_us@%d" % (kind, top["bytes"])] = value
    for w in gpu.get("workloads") or []:
        for name, timing in sorted((w.get("strategies") or {}).items()):
            value = _steady_median(timing)
            if value is not None:
                metrics["%s/%s" % (w.get("name"), name)] = value
    for kind in ("pinned", "pageable"):
        value = _steady_median((gpu.get("h2d") or {}).get(kind))
        if value is not None:
            metrics["h2d/" + kind] = value
    return metrics


MIN_GPUS = 3   # with two GPUs each is as far off the other: neither can be named


def find_outliers(gpus, tolerance=OUTLIER_TOLERANCE):
    """[{index, median_ratio, metrics_compared, metrics_off, metric, value, siblings_median, ratio}]: GPUs whose figures
    are, taken together, more than `tolerance` off their siblings' (the median of the GPU's ratios decides;
    metric/value/ratio name its worst figure). Needs at least MIN_GPUS measured GPUs."""
    measured = [(g.get("index"), gpu_metrics(g)) for g in gpus if g.get("status") == "ok"]
    if len(measured) < MIN_GPUS:
        return []
    outliers = []
    for index, metrics in measured:
        ratios = []
        for metric, value in sorted(metrics.items()):
            sibling = percentile(sorted(m[metric] for i, m in measured if i != index and metric in m), 50)
            if sibling and sibling > 0:
                ratios.append((metric, value, sibling, value / sibling))
        typical = percentile(sorted(r[3] for r in ratios), 50)
        if typical is None or abs(typical - 1.0) <= tolerance:
            continue
        metric, value, sibling, ratio = max(ratios, key=lambda r: abs(r[3] - 1.0))
        outliers.append({"index": index, "median_ratio": round(typical, 3), "metrics_compared": len(ratios),
                         "metrics_off": sum(1 for r in ratios if abs(r[3] - 1.0) > tolerance),
                         "metric": metric, "value": round(value, 3), "siblings_median": round(sibling, 3),
                         "ratio": round(ratio, 3)})
    return outliers


def budget_losses(workloads, offset):
    """What a device's time budget cost it: the workloads skipped for time and their field sets (replay
    paths), with where its rotated order began."""
    lost = [w["name"] for w in workloads if w.get("reason") == BUDGET_SPENT]
    return {"workload_order": {"offset": offset, "first": workloads[0]["name"] if workloads else None},
            "lost_to_budget": lost,
            "lost_field_sets": sorted(set(w["path"] for w in workloads if w["name"] in lost))}
