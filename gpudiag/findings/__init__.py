"""Findings: pure rules that read a run's host results and return `Finding`s, one module per theme.

`all_findings(run)` runs every rule and returns the findings in a stable order (severity, id, hosts).

This module is the package's public API: nothing outside the package imports its theme modules, and only the
layers above it (gpudiag.cli, gpudiag.render, gpudiag.rundiff) import it, by the names in `__all__`; models,
probe_view, verdict, store, transports and inventory import nothing from it (tests/control/test_layer_rules.py).
Plain reads of probe data (no judgement) live in `gpudiag.probe_view`.
"""

from __future__ import annotations

from typing import Callable

from gpudiag.findings import (
    copies,
    cuda_graph,
    decode_step,
    dflash,
    fast_path,
    fleet,
    graphs_off,
    health,
    hidden_states,
    hosts,
    kernel_libs,
    live_server,
    server_logs,
    serving,
    sglang,
)
from gpudiag.findings import serving_fleet
from gpudiag.findings.answers import Answer
from gpudiag.findings.questions import QUESTIONS, Question, coverage_line, host_answers
from gpudiag.findings.common import sort_findings
from gpudiag.findings.copies import NOISY_CV, OUTLIER_RATIO
from gpudiag.findings.facts import HostFacts, host_facts, torch_facts, torch_from_other_interpreter
from gpudiag.findings.copies import copy_path_text
from gpudiag.findings.server_flags import command_line, server_args, servers_of
from gpudiag.findings.commands import with_run_options
from gpudiag.findings.group import (
    STAND_IN,
    agreeing_groups,
    agreement_by_digest,
    for_each_host,
    merge_across_hosts,
    reproduce_command,
)
from gpudiag.findings.savings import rank as rank_copies
from gpudiag.findings.server_scope import release_of, scope
from gpudiag.findings.serving_compare import decode_figures
from gpudiag.findings.serving_view import BUCKET_NAMES, bucket_text
from gpudiag.findings.steps import order as step_order, step as next_step
from gpudiag.derived import remembered
from gpudiag.models import SEVERITY_RANK, Evidence, Finding, HostResult
from gpudiag.run_records import LoadedRun

__all__ = [
    "BUCKET_NAMES",
    "NOISY_CV",
    "OUTLIER_RATIO",
    "QUESTIONS",
    "Question",
    "RULES",
    "RUN_RULES",
    "SEVERITY_RANK",
    "STAND_IN",
    "Answer",
    "HostFacts",
    "agreeing_groups",
    "agreement_by_digest",
    "all_findings",
    "bucket_text",
    "command_line",
    "copy_path_text",
    "for_each_host",
    "coverage_line",
    "has_errors",
    "host_answers",
    "HOST_DERIVED",
    "host_facts",
    "next_step",
    "rank_copies",
    "release_of",
    "reproduce_command",
    "scope",
    "server_args",
    "servers_of",
    "step_order",
    "torch_facts",
    "with_run_options",
]

Rule = Callable[[list[HostResult]], list[Finding]]


def serving_torch_only(rule: Rule) -> Rule:
    """The rule judges torch as sglang runs it: hosts whose torch facts come from another interpreter than the
    one sglang was read from are left out (sglang.torch_other_interpreter says so instead)."""

    def judged(hosts: list[HostResult]) -> list[Finding]:
        return rule([h for h in hosts if not torch_from_other_interpreter(h)])

    judged.__name__, judged.__module__ = rule.__name__, rule.__module__
    return judged


RULES: tuple[Rule, ...] = (
    serving_torch_only(copies.torch_foreach_copy),  # 1
    sglang.eagle_per_tensor_copies,  # 2
    hidden_states.hidden_states_split,  # 3
    dflash.dflash_draft_graph_disabled,  # 4
    graphs_off.spec_without_graphs,  # 5
    cuda_graph.repro_failures,  # 6
    copies.gpu_copy_outliers,  # 7
    fleet.fleet_drift,  # 8
    hosts.unscanned_hosts,  # 9
    sglang.local_modifications,  # 10
    sglang.torch_other_interpreter,  # 11
    fast_path.eagle_fill_fast_path_unread,  # 12
    live_server.server_not_on_disk,  # 13
    server_logs.server_log_findings,  # 14: live servers' logs, classified on the host
    serving.accept_len_one,  # 15: live servers' decode lines: drafts all rejected
    serving.graphs_off_in_log,  # 16: decode lines without graphs the flags leave on
    serving_fleet.spec_vs_baseline,  # 17: same model with and without speculation, per #running-req
    decode_step.bound_buckets,  # 18: what bounds each decode bucket (Q11/Q12's analysis)
    decode_step.speculation_costs,  # 19: verify cost, break-even, default running cap (Q13's)
    decode_step.kv_replicated,  # 20: MLA latent cache on every TP rank
    health.pcie_degraded,  # 21: host health (env.health): PCIe link below its maximum
    health.throttling,  # 22: clock event reasons active
    health.memory_errors,  # 23: uncorrected ECC, remapped rows, retired pages
    health.xid_since_boot,  # 24: Xid lines in this boot's kernel log
    kernel_libs.kernel_libs_mismatch,  # 25: kernel libraries against sglang's Requires-Dist
    health.links_down,  # 26: NVLink links inactive, NVSwitch fabric not completed
)


# Rules that compare hosts; every other rule judges each host on its own, once per group of agreeing hosts.
FLEET_RULES = frozenset({fleet.fleet_drift, serving_fleet.spec_vs_baseline})

# Rules over the run's own record (run.json) rather than its hosts.
RUN_RULES: tuple[Callable[[dict], list[Finding]], ...] = (
    server_logs.classified_log,  # 6, for `repro --log FILE` runs
)


def all_findings(run: LoadedRun) -> list[Finding]:
    hosts_sorted = sorted(run.hosts, key=lambda h: h.name)
    per_host = for_each_host(host_rule_findings, hosts_sorted)  # once per group of agreeing hosts
    found: list[Finding] = []
    for index in range(len(_host_rules())):
        found.extend(f for each in per_host for f in each[index])
    for rule in (rule for rule in RULES if rule in FLEET_RULES):
        found.extend(_guarded(rule, hosts_sorted))
    for run_rule in RUN_RULES:
        found.extend(_guarded(run_rule, run.manifest.extra))
    return sort_findings(merge_across_hosts(found))


def _host_rules() -> tuple[Rule, ...]:
    return tuple(rule for rule in RULES if rule not in FLEET_RULES)


@remembered
def host_rule_findings(host: HostResult) -> tuple[list[Finding], ...]:
    """What each rule that judges hosts one at a time finds on this host, in RULES order."""
    return tuple(_guarded(rule, [host]) for rule in _host_rules())


# What the findings read of each host, one remembered function each: all a streamed reader must derive
# before it drops a host's data for the findings to be the same.
HOST_DERIVED = (host_rule_findings, host_facts, fleet.installed_timings, decode_figures)


def _guarded(rule: Callable, argument: object) -> list[Finding]:
    try:
        return list(rule(argument))
    except Exception as exc:  # noqa: BLE001 - odd host data must not take the whole report down
        return [_rule_failed(rule, exc)]


def _rule_failed(rule: Callable, exc: Exception) -> Finding:
    name = f"{rule.__module__.rsplit('.', 1)[-1]}.{rule.__name__}"
    return Finding(
        id="report.rule_failed",
        severity="warning",
        title=f"rule {name} could not read this run",
        hosts=(),
        evidence=(Evidence(kind="text", text=f"{type(exc).__name__}: {exc}"),),
        recommendation="The other findings stand; report this with the run's host files attached.",
        sources=(),
        action=f"Rerun `gpudiag report` with GPUDIAG_DEBUG=1 for rule {name}'s traceback and report it with the run's "
        "host files (a gpudiag bug)",
    )


def has_errors(findings: list[Finding]) -> bool:
    """Whether any finding is error or worse (the default --fail-on threshold)."""
    return any(f.severity in ("critical", "error") for f in findings)
