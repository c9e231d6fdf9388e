"""The replay-copy saving per decode step, computed once: Q5, the EAGLE copy finding, Next steps and the JSON all
read these numbers, and nothing reads a saving back out of text.

Per GPU and replay path: the installed release's own copy (its baseline) against the fastest strategy sglang can
run (`USABLE_STRATEGIES`: never `packed`, which needs an arena sglang does not allocate, nor the size split, which
no release ships), at the batch size the live server captures graphs up to when it was measured, else the largest
measured. A decode step replays each path once, so the step's saving is the sum over the paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.findings.copies import ok_timing
from gpudiag.findings.server_flags import graph_max_bs, server_args, servers_of
from gpudiag.models import HostResult
from gpudiag.probe_view import copy_gpus, dig, number, workloads
from probes.copybench import strategies as strategy_facts

# Strategies sglang itself can run on a replay path (declared beside the strategies): the grouped foreach copy,
# sglang's own named split (hidden_states on its own copy_(), PR #28465) and the installed release's function.
USABLE_STRATEGIES = strategy_facts.USABLE
REPLAYS_PER_STEP = 1  # a decode step replays the draft and the draft-extend graph once each


@dataclass(frozen=True)
class PathSaving:
    path: str
    batch_size: int | None
    baseline_us: float  # what the installed release does on this path
    best: str  # the fastest usable strategy
    best_us: float
    saving_us: float  # per replay, never negative

    @property
    def per_step_us(self) -> float:
        return self.saving_us * REPLAYS_PER_STEP

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "batch_size": self.batch_size,
            "installed_us": round(self.baseline_us, 3),
            "best": self.best,
            "best_us": round(self.best_us, 3),
            "saving_us_per_replay": round(self.saving_us, 3),
            "replays_per_step": REPLAYS_PER_STEP,
        }


@dataclass(frozen=True)
class GpuSaving:
    gpu: str  # the GPU's index as copy_bench names it
    paths: tuple[PathSaving, ...]
    basis: str  # which batch size was read: "the live server's max bs 64" or "the largest measured"

    @property
    def us_per_step(self) -> float:
        return round(sum(p.per_step_us for p in self.paths), 1)

    def key(self) -> tuple:
        """What two GPUs must share to be stated as one: the same per-path figures."""
        return tuple((p.path, p.batch_size, p.best, round(p.baseline_us, 1), round(p.best_us, 1)) for p in self.paths)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "saving_us_per_step": self.us_per_step,
            "basis": self.basis,
            "paths": [p.to_dict() for p in self.paths],
        }


def live_max_bs(host: HostResult) -> int | None:
    """The largest CUDA-graph batch size a live server on the host captures, when its flags say."""
    sizes = [found[0] for s in servers_of(host) if (found := graph_max_bs(server_args(s)))]
    return max(sizes) if sizes else None


def _baseline_us(workload: dict[str, Any]) -> float | None:
    baseline = number(dig(workload, "installed_baseline", "median_us"))
    if baseline is None and (timing := ok_timing(workload, strategy_facts.INSTALLED)):
        baseline = number(timing.get("median_us"))
    return baseline


def path_saving(workload: dict[str, Any]) -> PathSaving | None:
    """One measured workload: the installed copy against the fastest strategy sglang can run; None unmeasured."""
    baseline = _baseline_us(workload)
    usable = [(us, s) for s in USABLE_STRATEGIES if (t := ok_timing(workload, s)) and (us := number(t["median_us"]))]
    if baseline is None or not usable:
        return None
    best_us, best = min(usable)
    size = workload.get("batch_size")
    return PathSaving(
        path=str(workload.get("path")),
        batch_size=size if isinstance(size, int) else None,
        baseline_us=baseline,
        best=best,
        best_us=best_us,
        saving_us=max(0.0, baseline - best_us),
    )


def _pick(candidates: list[PathSaving], max_bs: int | None) -> tuple[PathSaving, bool]:
    """The live server's batch size when measured (True), else the largest measured (False)."""
    if max_bs is not None:
        for c in candidates:
            if c.batch_size == max_bs:
                return c, True
    return max(candidates, key=lambda c: c.batch_size or 0), False


def gpu_saving(gpu: dict[str, Any], max_bs: int | None, paths: set[str] | None = None) -> GpuSaving | None:
    """One GPU's saving per decode step over its measured replay paths (only `paths` when given)."""
    by_path: dict[str, list[PathSaving]] = {}
    for w in workloads(gpu):
        if paths is not None and str(w.get("path")) not in paths:
            continue
        found = path_saving(w)
        if found:
            by_path.setdefault(found.path, []).append(found)
    if not by_path:
        return None
    picked = [_pick(candidates, max_bs) for _, candidates in sorted(by_path.items())]
    live = all(at_live for _, at_live in picked)
    basis = f"the live server's max bs {max_bs}" if live and max_bs is not None else "the largest batch size measured"
    return GpuSaving(gpu=str(gpu.get("index")), paths=tuple(p for p, _ in picked), basis=basis)


def host_savings(host: HostResult, paths: set[str] | None = None) -> list[GpuSaving]:
    """Every measured GPU's saving per decode step, in copy_bench's order."""
    max_bs = live_max_bs(host)
    found = []
    for gpu in copy_gpus(host, cuda_only=True):
        if gpu.get("status", "ok") == "ok" and (saving := gpu_saving(gpu, max_bs, paths)):
            found.append(saving)
    return found


def representative(savings: list[GpuSaving]) -> GpuSaving | None:
    """The GPU whose saving is the (lower) median of the host's: one figure a finding can state, and Q5 states too."""
    if not savings:
        return None
    ranked = sorted(savings, key=lambda s: s.us_per_step)
    return ranked[(len(ranked) - 1) // 2]
