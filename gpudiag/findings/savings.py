"""Copy strategies ranked and priced, computed once: Q5, the copy findings, Next steps, the appendix and the JSON
all read `rank()` and the per-GPU figures built from it, and nothing reads a ranking or a saving back out of text.

Every cost is a pair of clocks: CPU issue (the eager median, what the Python replay path pays per launch) and GPU
stream (the median inside a replayed CUDA graph, what the copies occupy on the stream). Per workload `rank()` names
the best strategy by each clock among those sglang can run (`USABLE_STRATEGIES`: never `packed`, which needs an arena
sglang does not allocate, nor the size split, which no release ships) and prices it against a baseline: the installed
release's own function as timed, or, when it could not be timed, the strategy that release is known to use
(probes/replay_fields.py, read from the wheels: 0.5.14+ groups the small fields and copies hidden_states with its own
copy_(); up to 0.5.11 the EAGLE runners copy tensor by tensor), said as such. Without a release there is no
baseline, and the reason says so. Each GPU's figures per decode step are built from `rank()` in
gpudiag/findings/step_savings.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gpudiag.identity_memo import by_identity
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, dig, fmt_us, number, probe
from probes import replay_fields
from probes.copybench import strategies as strategy_facts

# Strategies sglang itself can run on a replay path (declared beside the strategies): the grouped foreach copy,
# sglang's own named split (hidden_states on its own copy_(), PR #28465) and the installed release's function.
USABLE_STRATEGIES = strategy_facts.USABLE
REPLAYS_PER_STEP = 1  # a decode step replays the draft and the draft-extend graph once each
CLOCKS = (("cpu_issue", "CPU issue"), ("gpu_stream", "GPU stream"))
NO_RELEASE = "no sglang release was read on this host (sglang_source found none), so nothing says which copy it runs"


@dataclass(frozen=True)
class Cost:
    """A cost (or a saving) in both clocks, µs; None where that clock was not timed."""

    cpu_us: float | None
    gpu_us: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {"cpu_issue_us": _round(self.cpu_us), "gpu_stream_us": _round(self.gpu_us)}

    def text(self) -> str:
        """'38.1 µs CPU issue / 4.1 µs GPU stream' ('-' for a clock not timed)."""
        return f"{fmt_us(self.cpu_us)} CPU issue / {fmt_us(self.gpu_us)} GPU stream"

    def __add__(self, other: Cost) -> Cost:
        return Cost(_add(self.cpu_us, other.cpu_us), _add(self.gpu_us, other.gpu_us))


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else max(0.0, a - b)


def strategy_cost(workload: dict[str, Any], strategy: str) -> Cost | None:
    """A verified strategy's medians, eager and replayed; None when it copied wrong or was not timed."""
    timing = as_dict(dig(workload, "strategies", strategy))
    if timing.get("status", "ok") != "ok" or number(timing.get("median_us")) is None:
        return None
    graph = as_dict(timing.get("graph"))
    gpu = number(graph.get("median_us")) if graph.get("status", "ok") == "ok" else None
    return Cost(number(timing.get("median_us")), gpu)


@dataclass(frozen=True)
class Baseline:
    strategy: str  # the timing that stands for what the release does
    kind: str  # installed: the release's own function (or its per-tensor loop) as timed; known: the release's
    # known strategy, timed as the matching built-in strategy
    release: str | None
    cost: Cost
    said: str  # how the report says it

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "kind": self.kind, "release": self.release, "said": self.said} | (
            self.cost.to_dict()
        )


@dataclass(frozen=True)
class Ranking:
    """One workload ranked by both clocks and priced against its baseline."""

    name: str
    path: str
    batch_size: int | None
    hidden_size: int | None
    costs: dict[str, Cost] = field(hash=False)  # every verified strategy
    fastest: tuple[str | None, str | None]  # any strategy, by CPU issue and by GPU stream
    best: tuple[str | None, str | None]  # the fastest sglang can run, by each clock
    best_cost: Cost  # best[0]'s CPU issue, best[1]'s GPU stream
    baseline: Baseline | None
    no_baseline: str | None  # why there is none

    @cached_property  # read for every table cell, answer and finding that prices this workload
    def saving(self) -> Cost | None:
        """Per replay, never negative, in each clock against that clock's best."""
        if self.baseline is None:
            return None
        return Cost(
            _less(self.baseline.cost.cpu_us, self.best_cost.cpu_us),
            _less(self.baseline.cost.gpu_us, self.best_cost.gpu_us),
        )

    def to_dict(self) -> dict[str, Any]:
        saving = self.saving
        return {
            "path": self.path,
            "batch_size": self.batch_size,
            "hidden_size": self.hidden_size,
            "best": {
                clock: {"strategy": name, "us": _round(us)}
                for (clock, _), name, us in zip(CLOCKS, self.best, (self.best_cost.cpu_us, self.best_cost.gpu_us))
            },
            "baseline": self.baseline.to_dict() if self.baseline else None,
            "no_baseline": self.no_baseline,
            "saving_us_per_replay": saving.to_dict() if saving else None,
            "replays_per_step": REPLAYS_PER_STEP,
        }


def _fastest(costs: dict[str, Cost], among: tuple[str, ...] | None) -> tuple[str | None, str | None]:
    out: list[str | None] = []
    for clock in ("cpu_us", "gpu_us"):
        timed = sorted(
            (us, name)
            for name, cost in costs.items()
            if (among is None or name in among) and (us := getattr(cost, clock)) is not None
        )
        out.append(timed[0][1] if timed else None)
    return out[0], out[1]


def known_strategy(path: str, release: str | None, hidden_separate: bool | None = None) -> tuple[str, str] | None:
    """(strategy, in words) the release is known to copy `path` with, from the one replay-field table (read from the
    0.5.11, 0.5.14 and 0.5.23 wheels); None without a release."""
    if not release or path not in replay_fields.PATHS:
        return None
    if not replay_fields.batched(path, release):
        return strategy_facts.LOOP, f"sglang {release} copies {path} tensor by tensor"
    own = any(r["own_copy"] and r["when"] is None for r in replay_fields.rows(path, release))
    if hidden_separate is False:
        return strategy_facts.GROUPED, f"sglang {release} copies every {path} field in one grouped foreach call"
    if own or hidden_separate:
        return (
            strategy_facts.NAMED_SPLIT,
            f"sglang {release} groups the small {path} fields and copies hidden_states with its own copy_()",
        )
    return strategy_facts.GROUPED, f"sglang {release} copies the {path} fields in one grouped foreach call"


def _baseline(workload: dict[str, Any], costs: dict[str, Cost], installed: dict[str, Any]) -> Baseline | str:
    """What the installed release does on the workload's path, timed; else the reason there is no baseline."""
    path = str(workload.get("path"))
    release = installed.get("release") if isinstance(installed.get("release"), str) else None
    behaviour = as_dict(dig(installed, "behaviour", path))
    kind = behaviour.get("kind") or "unknown"
    if kind == "unknown" and release and path in replay_fields.PATHS:
        kind = "grouped" if replay_fields.batched(path, release) else "per_tensor"
    own = costs.get(strategy_facts.INSTALLED)
    if kind == "per_tensor":
        if (loop := costs.get(strategy_facts.LOOP)) is None:
            return "the per-tensor loop the installed release runs on this path has no verified timing"
        said = f"installed: sglang {release or '(release unknown)'} copies {path} tensor by tensor (timed as loop)"
        return Baseline(strategy_facts.LOOP, "installed", release, loop, said)
    if own is not None:  # the release's own function, timed: what it runs wherever it groups (or may)
        return Baseline(strategy_facts.INSTALLED, "installed", release, own, "installed: the release's own function")
    why_not_own = str(dig(workload, "strategies", strategy_facts.INSTALLED, "reason") or "not timed")
    known = known_strategy(path, release, behaviour.get("hidden_states_separate"))
    if kind == "grouped" and known is None:  # grouped but no version: the source said whether hidden_states leaves
        sep = behaviour.get("hidden_states_separate")
        known = (strategy_facts.NAMED_SPLIT if sep else strategy_facts.GROUPED, "the installed release groups them")
    if known is None:
        return f"{NO_RELEASE}; the installed function: {why_not_own}"
    strategy, words = known
    if (cost := costs.get(strategy)) is None:
        return f"{words}, and {strategy} has no verified timing"
    said = f"known, not timed itself ({why_not_own}): {words}, timed as {strategy}"
    return Baseline(strategy, "known", release, cost, said)


@by_identity(512)  # the rules, the answers and the appendix rank the same workloads of a host again and again
def rank(workload: dict[str, Any], installed: dict[str, Any]) -> Ranking:
    """The one ranking of a workload's copy strategies: the fastest by each clock (any, and what sglang can run),
    and the baseline the saving is priced against (`installed` is copy_bench's `installed` section)."""
    costs = {name: cost for name in as_dict(workload.get("strategies")) if (cost := strategy_cost(workload, name))}
    best = _fastest(costs, USABLE_STRATEGIES)
    best_cost = Cost(
        costs[best[0]].cpu_us if best[0] else None,
        costs[best[1]].gpu_us if best[1] else None,
    )
    base = _baseline(workload, costs, installed)
    size, hidden = workload.get("batch_size"), workload.get("hidden_size")
    return Ranking(
        name=str(workload.get("name")),
        path=str(workload.get("path")),
        batch_size=size if isinstance(size, int) else None,
        hidden_size=hidden if isinstance(hidden, int) else None,
        costs=costs,
        fastest=_fastest(costs, None),
        best=best,
        best_cost=best_cost,
        baseline=base if isinstance(base, Baseline) else None,
        no_baseline=base if isinstance(base, str) else None,
    )


def installed_section(host: HostResult) -> dict[str, Any]:
    return as_dict(dig(probe(host, "copy_bench"), "installed"))
