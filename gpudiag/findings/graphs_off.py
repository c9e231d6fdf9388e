"""Rule 5: speculative decoding served with decode CUDA graphs disabled: what that costs a decode step, the flag
to undo, and the batch sizes the repro proved safe (or where the repro could run when no GPU here is free)."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source
from gpudiag.findings.cuda_graph import ok_boundary
from gpudiag.findings.dflash import first_guard_holding
from gpudiag.findings.server_flags import (
    EAGLE_FAMILY,
    algorithm_of,
    command_line,
    decode_graph_switch,
    max_bs_flag,
    server_args,
    servers_of,
)
from gpudiag.findings.gpu_room import room
from gpudiag.findings.server_scope import server_name
from gpudiag.models import Evidence, Finding, HostResult


def spec_without_graphs(hosts: list[HostResult]) -> list[Finding]:
    """Rule 5: a deployment serving speculative decoding with decode CUDA graphs disabled."""
    findings = []
    for host in hosts:
        for server in servers_of(host):
            algorithm = algorithm_of(server)
            disabled, switch = decode_graph_switch(server_args(server))
            if algorithm and algorithm != "NONE" and disabled:
                findings.append(_finding(host, server, algorithm, switch))
    return findings


def _advice(host: HostResult, switch: str, boundary: tuple[str, int] | None) -> tuple[str, str, list[Evidence]]:
    """(advice, one-line action, extra evidence): the repro's clean range when it ran, else where it can run."""
    max_bs = max_bs_flag(host)
    if boundary:
        measured = Evidence(
            kind="measurement", host=host.name, text=f"repro: {boundary[0]} ok up to batch size {boundary[1]}"
        )
        advice = (
            f"Re-enable graphs within the range the repro proved safe on this host: {_undo(switch)} "
            f"and set {max_bs} {boundary[1]} ({boundary[0]} captured and replayed cleanly up to "
            f"batch size {boundary[1]})."
        )
        return advice, f"{_undo(switch)} and set {max_bs} {boundary[1]} (the repro's clean range)", [measured]
    blocked = room(host).blocked()
    where = (
        f"The repro cannot run here ({blocked}): on a drained host of the same build, or in a maintenance window, run"
        if blocked
        else "Run"
    )
    advice = (
        f"{where} `gpudiag repro cuda-graph-crash` to find the batch sizes that capture "
        f"and replay cleanly, then {_undo(switch)} and set {max_bs} at that boundary."
    )
    action = (
        f"{'On a drained host, f' if blocked else 'F'}ind the batch sizes that capture cleanly "
        f"(`gpudiag repro cuda-graph-crash`), then {_undo(switch)}"
    )
    return advice, action, []


def _finding(host: HostResult, server: dict[str, Any], algorithm: str, switch: str) -> Finding:
    args = server_args(server)
    boundary = ok_boundary(host, algorithm)
    advice, action, measured = _advice(host, switch, boundary)
    flag = Evidence(
        kind="flag",
        host=host.name,
        text=f"{server_name(host, server)}: --speculative-algorithm {algorithm} with {switch}",
        snippet=command_line(server) or None,
    )
    guard = algorithm == "DFLASH" and first_guard_holding(host, server)
    return Finding(
        id="cuda_graph.spec_without_graphs",
        severity="warning",
        title=f"{algorithm} speculative decoding is served with CUDA graphs disabled",
        hosts=(host.name,),
        evidence=(flag, *measured),
        recommendation=f"Without graphs, {_passes(algorithm, args.get('speculative_num_steps'))} launches its "
        f"kernels one by one from the CPU (microseconds per launch) instead of replaying a "
        f"captured graph. {advice}{_guard_after(host, server, algorithm)}",
        sources=(source(host, "deployment"),)
        + ((source(host, "cuda_graph"),) if boundary else ())
        + ((source(host, "sglang_source"),) if guard else ()),
        action=action[0].upper() + action[1:],
    )


def _undo(switch: str) -> str:
    if switch.startswith("--cuda-graph-config"):
        return "set the decode backend in --cuda-graph-config to full (or drop its decode backend)"
    if switch.startswith("--cuda-graph-backend-decode"):
        return "set --cuda-graph-backend-decode full (or drop it)"
    return f"drop {switch}"


def _passes(algorithm: str, steps: Any) -> str:
    """The forward passes of one decode step. EAGLE: the draft loop runs num_steps - 1 draft forwards (its last
    step only selects top-k), then the target verifies and the draft extends over the accepted tokens."""
    steps = (
        steps
        if isinstance(steps, int) and not isinstance(steps, bool)
        else int(steps)
        if str(steps or "").isdigit()
        else None
    )
    if algorithm in EAGLE_FAMILY and steps == 1:
        return "each of the 2 forward passes of a decode step (the target's verify and the draft-extend)"
    if algorithm in EAGLE_FAMILY and steps:
        return (
            f"each of the {steps + 1} forward passes of a decode step ({steps - 1} draft "
            f"step{'' if steps - 1 == 1 else 's'}, the target's verify and the draft-extend)"
        )
    if algorithm in EAGLE_FAMILY:
        return "every forward pass of a decode step (the draft steps, the target's verify and the draft-extend)"
    return "every draft and target-verify forward pass of a decode step"


def _guard_after(host: HostResult, server: dict[str, Any], algorithm: str) -> str:
    """For DFlash: the draft-graph guard that would still hold once decode graphs are back on."""
    if algorithm != "DFLASH":
        return ""
    found = first_guard_holding(host, server)
    if not found:
        return ""
    guard, (_, why, lift) = found
    return (
        f" Even then this release keeps the DFlash draft eager ({guard.get('file') or 'worker'}:"
        f"{guard.get('line', '?')}) because {why}: {lift}."
    )
