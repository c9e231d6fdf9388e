"""Each GPU's copy savings per decode step, built from the one ranking of gpudiag/findings/savings.py: per GPU and
replay path the ranking is read at the batch size the live server captures graphs up to when it was measured, else
the largest measured. A decode step replays each path once, so a step's figures are the sums over the paths. Q5, the
copy findings and the JSON state these figures; none recomputes them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpudiag.findings.savings import REPLAYS_PER_STEP, Cost, Ranking, installed_section, rank
from gpudiag.findings.server_flags import graph_max_bs, server_args, servers_of
from gpudiag.identity_memo import by_identity
from gpudiag.models import HostResult
from gpudiag.probe_view import copy_gpus, cut_short, workloads


@dataclass(frozen=True)
class GpuSaving:
    gpu: str  # the GPU's index as copy_bench names it
    paths: tuple[Ranking, ...]  # one per replay path, at the batch size `basis` names
    basis: str  # which batch size was read: "the live server's max bs 64" or "the largest batch size measured"

    @cached_property
    def priced(self) -> tuple[Ranking, ...]:
        return tuple(p for p in self.paths if p.saving is not None)

    @cached_property
    def saving(self) -> Cost | None:
        """Per decode step, summed over the paths that have a baseline; None when none has."""
        found = [p.saving for p in self.priced if p.saving]
        if not found:
            return None
        total = found[0]
        for more in found[1:]:
            total = total + more
        return Cost(
            None if total.cpu_us is None else round(total.cpu_us * REPLAYS_PER_STEP, 1),
            None if total.gpu_us is None else round(total.gpu_us * REPLAYS_PER_STEP, 1),
        )

    @cached_property
    def us_per_step(self) -> float | None:
        """The CPU-issue saving per decode step: the one figure a finding claims (`saving_us_per_step`)."""
        saving = self.saving
        return saving.cpu_us if saving else None

    def key(self) -> tuple:
        """What two GPUs must share to be stated as one: the same per-path figures."""
        return tuple(
            (p.path, p.batch_size, p.hidden_size, p.best, _key_cost(p.best_cost))
            + ((p.baseline.strategy, _key_cost(p.baseline.cost)) if p.baseline else (p.no_baseline,))
            for p in self.paths
        )

    def to_dict(self) -> dict[str, Any]:
        saving = self.saving
        return {
            "gpu": self.gpu,
            "saving_us_per_step": self.us_per_step,
            "saving_per_step": saving.to_dict() if saving else None,
            "basis": self.basis,
            "paths": [p.to_dict() for p in self.paths],
        }


def _key_cost(cost: Cost) -> tuple[float | None, float | None]:
    return tuple(None if v is None else round(v, 1) for v in (cost.cpu_us, cost.gpu_us))  # type: ignore[return-value]


def live_max_bs(host: HostResult) -> int | None:
    """The largest CUDA-graph batch size a live server on the host captures, when its flags say."""
    sizes = [found[0] for s in servers_of(host) if (found := graph_max_bs(server_args(s)))]
    return max(sizes) if sizes else None


def measured(ranking: Ranking) -> bool:
    return ranking.best_cost.cpu_us is not None or ranking.best_cost.gpu_us is not None


def _pick(candidates: list[Ranking], max_bs: int | None) -> tuple[Ranking, bool]:
    """The live server's batch size when measured (True), else the largest measured (False); the largest hidden
    size of that batch size."""
    if max_bs is not None:
        at = [c for c in candidates if c.batch_size == max_bs]
        if at:
            return max(at, key=lambda c: c.hidden_size or 0), True
    return max(candidates, key=lambda c: (c.batch_size or 0, c.hidden_size or 0)), False


def gpu_saving(
    gpu: dict[str, Any], max_bs: int | None, installed: dict[str, Any], paths: set[str] | None = None
) -> GpuSaving | None:
    """One GPU's ranked figures per replay path (only `paths` when given); None when no workload was timed."""
    picked = [pick for path, pick in _picks(gpu, max_bs, installed).items() if paths is None or path in paths]
    if not picked:
        return None
    live = all(at_live for _, at_live in picked)
    basis = f"the live server's max bs {max_bs}" if live and max_bs is not None else "the largest batch size measured"
    return GpuSaving(gpu=str(gpu.get("index")), paths=tuple(p for p, _ in picked), basis=basis)


@by_identity(64)  # Q5 reads every path, the EAGLE finding the EAGLE paths: picked once per GPU
def _picks(gpu: dict[str, Any], max_bs: int | None, installed: dict[str, Any]) -> dict[str, tuple[Ranking, bool]]:
    """Per replay path, in path order: the measured ranking read (_pick) and whether it is at the live batch size."""
    by_path: dict[str, list[Ranking]] = {}
    for w in workloads(gpu):
        ranked = rank(w, installed)
        if measured(ranked):
            by_path.setdefault(ranked.path, []).append(ranked)
    return {path: _pick(candidates, max_bs) for path, candidates in sorted(by_path.items())}


def host_savings(host: HostResult, paths: set[str] | None = None) -> list[GpuSaving]:
    """Every measured GPU's ranked figures per decode step, in copy_bench's order."""
    max_bs = live_max_bs(host)
    installed = installed_section(host)
    found = []
    for gpu in copy_gpus(host, cuda_only=True):
        kept = gpu.get("status", "ok") == "ok" or bool(cut_short(gpu))  # cut short: what it measured
        if kept and (saving := gpu_saving(gpu, max_bs, installed, paths)):
            found.append(saving)
    return found


def representative(savings: list[GpuSaving]) -> GpuSaving | None:
    """The GPU whose CPU-issue saving is the (lower) median of the host's: one figure a finding can state, and Q5
    states too. Only GPUs with a saving count."""
    priced = [s for s in savings if s.us_per_step is not None]
    if not priced:
        return None
    ranked = sorted(priced, key=lambda s: s.us_per_step or 0.0)
    return ranked[(len(ranked) - 1) // 2]
