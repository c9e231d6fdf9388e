"""Optional charts for the markdown report (extra `gpudiag[plots]`): copy time vs size, repro heat map.

matplotlib is imported inside the functions; without it `charts_available()` is False and nothing is drawn.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from gpudiag.findings.common import as_dict, as_list, number, safe_stem
from gpudiag.findings.copies import copy_gpus, workloads
from gpudiag.findings.cuda_graph import cells
from gpudiag.models import LoadedRun

STATUS_CODES = {"ok": 0, "skipped": 1}   # every other status is a failure (2)


def charts_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_charts(run: LoadedRun, out_dir: Path) -> dict[str, str]:
    """Draw every chart the run has data for into out_dir; returns {"copy:<host>": file name, …}.

    Returns {} (and writes nothing) when matplotlib is not installed.
    """
    if not charts_available():
        return {}
    import matplotlib
    matplotlib.use("Agg")   # no display on a bastion or in CI
    charts: dict[str, str] = {}
    for host in run.hosts:
        gpus = copy_gpus(host)
        if gpus and (_sweep(gpus[0]) or workloads(gpus[0])):
            name = f"copy-{safe_stem(host.name)}.png"
            _copy_chart(gpus[0], host.name, out_dir / name)
            charts[f"copy:{host.name}"] = name
        if cells(host):
            name = f"repro-{safe_stem(host.name)}.png"
            _repro_chart(cells(host), host.name, out_dir / name)
            charts[f"repro:{host.name}"] = name
    return charts


def _sweep(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in as_list(gpu.get("sweep")) if isinstance(s, dict) and number(s.get("bytes"))]


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No timestamps or version in the PNG: the same run draws the same bytes.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt
    plt.close(fig)


def _workload_bytes(workload: dict[str, Any]) -> float:
    return sum(number(f.get("bytes")) or 0 for f in as_list(workload.get("fields")) if isinstance(f, dict))


def _copy_chart(gpu: dict[str, Any], host: str, path: Path) -> None:
    """Left: one tensor, copy_() vs foreach by size (the sweep). Right: each strategy by replay size."""
    import matplotlib.pyplot as plt
    fig, (sweep_ax, replay_ax) = plt.subplots(1, 2, figsize=(11, 4))
    sweep = _sweep(gpu)
    for key, label in (("copy_us", "copy_() (DMA)"), ("foreach_us", "foreach copy kernel")):
        sweep_ax.plot([s["bytes"] for s in sweep], [number(s.get(key)) for s in sweep], marker="o", label=label)
    sweep_ax.set(title="one tensor (size sweep)", xlabel="bytes", ylabel="µs (median)")
    measured = sorted((w for w in workloads(gpu) if _workload_bytes(w)),
                      key=lambda w: (_workload_bytes(w), str(w.get("name"))))
    strategies = sorted({k for w in measured for k in as_dict(w.get("strategies"))})
    for strategy in strategies:
        points = [(_workload_bytes(w), number(as_dict(as_dict(w.get("strategies")).get(strategy)).get("median_us")))
                  for w in measured]
        points = [(x, y) for x, y in points if y is not None]
        if points:
            replay_ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=strategy)
    replay_ax.set(title="one replay's copies, by strategy", xlabel="bytes per replay", ylabel="µs (median)")
    for ax in (sweep_ax, replay_ax):
        if ax.has_data():
            ax.set_xscale("log", base=2)
            ax.legend(fontsize=8)
    fig.suptitle(f"copy time vs size, {host} GPU {gpu.get('index')}")
    fig.tight_layout()
    _save(fig, path)


def _repro_chart(found: list[dict[str, Any]], host: str, path: Path) -> None:
    import matplotlib.pyplot as plt
    sizes = sorted({c.get("batch_size") for c in found if isinstance(c.get("batch_size"), int)})
    rows = sorted({(str(c.get("path")), str(c.get("draft_tokens", "-"))) for c in found})
    grid = [[float("nan")] * len(sizes) for _ in rows]
    for c in found:
        key = (str(c.get("path")), str(c.get("draft_tokens", "-")))
        if c.get("batch_size") in sizes:
            grid[rows.index(key)][sizes.index(c["batch_size"])] = STATUS_CODES.get(str(c.get("status")), 2)
    fig, ax = plt.subplots(figsize=(4 + 1.1 * len(sizes), 1.5 + 0.5 * len(rows)))
    ax.imshow(grid, cmap="RdYlGn_r", vmin=0, vmax=2, aspect="auto")
    ax.set_xticks(range(len(sizes)), [f"bs {s}" for s in sizes])
    ax.set_yticks(range(len(rows)), [f"{p} ({d} draft)" for p, d in rows])
    for c in found:
        key = (str(c.get("path")), str(c.get("draft_tokens", "-")))
        if c.get("batch_size") in sizes:
            ax.text(sizes.index(c["batch_size"]), rows.index(key), str(c.get("status")), ha="center",
                    va="center", fontsize=8, color="white")
    ax.set_title(f"CUDA-graph repro, {host}")
    fig.tight_layout()
    _save(fig, path)
