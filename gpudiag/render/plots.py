"""Optional charts for the markdown report (extra `gpudiag[plots]`): copy time vs size, repro heat map.

matplotlib is imported inside the functions; without it `charts_available()` is False and nothing is drawn.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from gpudiag.probe_view import as_list, number, safe_stem
from gpudiag.probe_view import copy_gpus, device_label, workloads
from gpudiag.probe_view import cells
from gpudiag.findings import rank_copies
from gpudiag.run_records import LoadedRun
from probes.copybench import strategies as strategy_facts

STATUS_CODES = {"ok": 0, "skipped": 1}  # every other status is a failure (2)


def charts_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


COPY_CAPTION = (
    "Left: one tensor copied by copy_() (DMA) and by the foreach kernel, by size, eager (solid, CPU issue) and "
    "inside a replayed graph (dashed, GPU stream) — where the dashed lines cross is the split point. Middle and "
    "right: one replay's copies per strategy, one series per workload, eager and replayed — each series' lowest "
    "point is that workload's best strategy in that clock."
)
REPRO_CAPTION = (
    "Each cell is one capture-and-replay in its own process: green ok, yellow skipped, red failed, grey not "
    "run; look for where red starts along batch size and draft tokens."
)
NOT_RUN = "lightgrey"  # a cell of the grid no child ran (its path, size or draft tokens were not asked)
# Strategies drawn (declared beside the strategies): those sglang can run, the per-tensor loop as the reference.
DRAWN_STRATEGIES = strategy_facts.DRAWN


def write_charts(run: LoadedRun, out_dir: Path) -> dict[str, str]:
    """Draw every chart the run has data for into out_dir; returns {"copy:<host>": file name,
    "copy:<host>:caption": text, "repro:<host>": …, "repro:<host>:not_drawn": why, …}.

    Returns {} (and writes nothing) when matplotlib is not installed.
    """
    if not charts_available():
        return {}
    import matplotlib

    matplotlib.use("Agg")  # no display on a bastion or in CI
    charts: dict[str, str] = {}
    for host in run.hosts:
        gpus = copy_gpus(host)
        if gpus and (_sweep(gpus[0]) or copy_series(gpus[0])):
            name = f"copy-{safe_stem(host.name)}.png"
            _copy_chart(gpus[0], host.name, out_dir / name)
            charts[f"copy:{host.name}"] = name
            charts[f"copy:{host.name}:caption"] = COPY_CAPTION
        found = cells(host)
        if found and all(c.get("status") == "skipped" for c in found):
            why = next((str(c.get("detail")) for c in found if c.get("detail")), "no reason recorded")
            charts[f"repro:{host.name}:not_drawn"] = f"every cell was skipped ({why}), so there is no heat map"
        elif found:
            name = f"repro-{safe_stem(host.name)}.png"
            _repro_chart(found, host.name, out_dir / name)
            charts[f"repro:{host.name}"] = name
            charts[f"repro:{host.name}:caption"] = REPRO_CAPTION
    return charts


def chart_device(gpu: dict[str, Any]) -> str:
    """'GPU 4 (NVIDIA H200)', or 'CPU' for a run without CUDA (never 'GPU None')."""
    return device_label(gpu)


def copy_series(gpu: dict[str, Any], clock: str = "cpu_us") -> dict[str, list[tuple[str, float]]]:
    """{workload: [(strategy, median µs), …]}: each workload its own series over the strategies drawn, in one clock
    (`cpu_us` eager, `gpu_us` inside a replayed graph), from the one ranking's costs."""
    series: dict[str, list[tuple[str, float]]] = {}
    for w in workloads(gpu):
        costs = rank_copies(w, {}).costs
        points = [(s, getattr(costs[s], clock)) for s in DRAWN_STRATEGIES if s in costs]
        found = [(s, float(y)) for s, y in points if y is not None]
        if found:
            series[str(w.get("name"))] = found
    return series


def _sweep(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in as_list(gpu.get("sweep")) if isinstance(s, dict) and number(s.get("bytes"))]


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No timestamps or version in the PNG: the same run draws the same bytes.
    fig.savefig(path, dpi=100, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)


def _copy_chart(gpu: dict[str, Any], host: str, path: Path) -> None:
    _save(copy_figure(gpu, host), path)


def copy_figure(gpu: dict[str, Any], host: str) -> Any:
    """Left: one tensor, copy_() vs foreach by size (the sweep, a numeric axis: lines), both clocks. Middle and
    right: each workload's replay by strategy, eager (CPU issue) and inside a replayed graph (GPU stream): the
    strategies are categories, so each workload is points side by side, never a line; a workload keeps its
    colour, and a strategy with no point says 'not run'."""
    import matplotlib.pyplot as plt

    fig, (sweep_ax, eager_ax, graph_ax) = plt.subplots(1, 3, figsize=(17, 4.5))
    sweep = _sweep(gpu)
    for key, label, style in (
        ("copy_us", "copy_() (DMA), eager", "-"),
        ("foreach_us", "foreach kernel, eager", "-"),
        ("copy_graph_us", "copy_() (DMA), replayed", "--"),
        ("foreach_graph_us", "foreach kernel, replayed", "--"),
    ):
        values = [number(s.get(key)) for s in sweep]
        if any(v is not None for v in values):
            sweep_ax.plot([s["bytes"] for s in sweep], values, style, marker="o", label=label)
    sweep_ax.set(
        title="one tensor (size sweep)", xlabel="tensor size (bytes, log scale)", ylabel="time per copy (µs, median)"
    )
    if sweep_ax.has_data():
        sweep_ax.set_xscale("log", base=2)
        sweep_ax.set_yscale("log")
        sweep_ax.legend(fontsize=8)
    positions = {s: i for i, s in enumerate(DRAWN_STRATEGIES)}
    for ax, clock, said in ((eager_ax, "cpu_us", "eager (CPU issue)"), (graph_ax, "gpu_us", "replayed (GPU stream)")):
        series = copy_series(gpu, clock)
        for n, (workload, points) in enumerate(series.items()):
            dodge = (n - (len(series) - 1) / 2) * min(0.1, 0.6 / max(1, len(series)))  # side by side, not stacked
            xs = [positions[s] + dodge for s, _ in points]
            ax.plot(xs, [y for _, y in points], marker="o", linestyle="none", label=workload)
        drawn = {s for points in series.values() for s, _ in points}
        for strategy in (s for s in DRAWN_STRATEGIES if s not in drawn):  # a category with no point says why
            ax.text(
                positions[strategy],
                0.03,
                "not run",
                transform=ax.get_xaxis_transform(),
                ha="center",
                fontsize=8,
                color="grey",
            )
        ax.set_xticks(
            range(len(DRAWN_STRATEGIES)),
            [s.replace("grouped_foreach", "grouped") for s in DRAWN_STRATEGIES],
            fontsize=8,
        )
        ax.set(title=f"one replay's copies, {said}", xlabel="strategy", ylabel="time per replay (µs, median)")
    legend_ax = graph_ax if graph_ax.has_data() else eager_ax
    if legend_ax.has_data():
        legend_ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"copy time, {host}, {chart_device(gpu)}")
    fig.tight_layout()
    return fig


def _repro_chart(found: list[dict[str, Any]], host: str, path: Path) -> None:
    _save(repro_figure(found, host), path)


def repro_figure(found: list[dict[str, Any]], host: str) -> Any:
    """The cells as a grid (path and draft tokens × batch size), every colour named in the legend, cells no
    child ran included."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    sizes = sorted({int(c["batch_size"]) for c in found if isinstance(c.get("batch_size"), int)})
    rows = sorted({(str(c.get("path")), str(c.get("draft_tokens", "-"))) for c in found})
    grid = [[float("nan")] * len(sizes) for _ in rows]
    for c in found:
        key = (str(c.get("path")), str(c.get("draft_tokens", "-")))
        if c.get("batch_size") in sizes:
            grid[rows.index(key)][sizes.index(c["batch_size"])] = STATUS_CODES.get(str(c.get("status")), 2)
    fig, ax = plt.subplots(figsize=(6 + 1.1 * len(sizes), 1.5 + 0.5 * len(rows)))
    cmap = plt.get_cmap("RdYlGn_r").with_extremes(bad=NOT_RUN)
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=2, aspect="auto")
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_yticks(range(len(rows)), [f"{p} ({d} draft tokens)" for p, d in rows])
    ax.set(xlabel="batch size (requests)", ylabel="path (draft tokens)")
    for c in found:
        key = (str(c.get("path")), str(c.get("draft_tokens", "-")))
        if c.get("batch_size") in sizes:
            ax.text(
                sizes.index(c["batch_size"]),
                rows.index(key),
                str(c.get("status")),
                ha="center",
                va="center",
                fontsize=8,
                color="white",
            )
    legend = [Patch(color=cmap(code / 2), label=label) for label, code in (("ok", 0), ("skipped", 1), ("failed", 2))]
    if any(value != value for row in grid for value in row):  # NaN: a cell no child ran
        legend.append(Patch(color=NOT_RUN, label="not run"))
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    ax.set_title(f"CUDA-graph repro, {host}")
    fig.tight_layout()
    return fig
