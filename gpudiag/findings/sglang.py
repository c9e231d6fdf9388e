"""sglang source findings: EAGLE replay copying inputs one tensor at a time, locally modified installs, and torch
facts read in another interpreter than the one whose sglang was read."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source, source_evidence, version_tuple
from gpudiag.probe_view import as_dict, as_list, dig, fmt_us, probe
from gpudiag.findings.step_savings import GpuSaving, host_savings, representative
from gpudiag.findings.gpu_room import room
from gpudiag.findings.facts import sglang_interpreter, torch_facts, torch_from_other_interpreter
from gpudiag.findings.server_flags import algorithm_of, eagle_family, servers_of
from gpudiag.models import Evidence, Finding, HostResult

BATCHED_RELEASE = "0.5.14"  # first sglang release with PR #28465 (batched EAGLE replay copies)
UPSTREAM_SAVING_US = 48  # per step, as reported in sglang PR #28465
EAGLE_PATHS = {"draft": "eagle_draft", "draft_extend": "eagle_draft_extend"}


def eagle_per_tensor_copies(hosts: list[HostResult]) -> list[Finding]:
    """Rule 2: the installed EAGLE draft / draft-extend replay copies its inputs tensor by tensor."""
    findings = []
    for host in hosts:
        sglang = probe(host, "sglang_source")
        paths = {name: as_dict(dig(sglang, "eagle", name)) for name in EAGLE_PATHS}
        slow = {name: fact for name, fact in paths.items() if fact.get("batched") is False}
        if slow:
            findings.append(_eagle_finding(host, sglang or {}, slow))
    return findings


def _eagle_finding(host: HostResult, sglang: dict[str, Any], slow: dict[str, dict[str, Any]]) -> Finding:
    version = str(sglang.get("version") or "?")
    evidence = []
    for name, fact in sorted(slow.items()):
        evidence += _path_evidence(host, name, fact)
    saving = representative(host_savings(host, {EAGLE_PATHS[name] for name in slow}))
    sources = [source(host, "sglang_source")]
    if saving:
        evidence.append(_saving_evidence(host, saving))
        sources.append(source(host, "copy_bench"))
        said = (
            f"measured on GPU {saving.gpu}, batching saves {fmt_us(saving.us_per_step)} per decode step of CPU "
            f"issue ({fmt_us(saving.saving.gpu_us if saving.saving else None)} of GPU stream; Q5; at {saving.basis})"
        )
    else:
        said = f"upstream measured about {UPSTREAM_SAVING_US} µs per decode step (sglang PR #28465); " + _measure_here(
            host
        )
    installed, batched = version_tuple(version), version_tuple(BATCHED_RELEASE)
    if installed is not None and batched is not None and installed < batched:
        action = (
            f"Upgrade sglang from {version} to {BATCHED_RELEASE} or later, the first release that batches "
            f"these copies (PR #28465)"
        )
        step = f"Upgrade sglang {version} → {BATCHED_RELEASE} or later (batched EAGLE replay copies, PR #28465)"
    else:
        action = (
            f"sglang {BATCHED_RELEASE} batches these copies (PR #28465), yet this install ({version}) does "
            "not: check it for local modifications or a backport that was lost"
        )
        step = f"Check sglang {version} for local modifications: {BATCHED_RELEASE}+ batches these copies"
    eagle_served = any(eagle_family(algorithm_of(s)) for s in servers_of(host))
    return Finding(
        id="sglang.eagle_per_tensor_copies",
        severity="warning" if eagle_served else "info",
        title=f"sglang {version}: EAGLE {' and '.join(n.replace('_', '-') for n in sorted(slow))} replay copies "
        "inputs one tensor at a time",
        hosts=(host.name,),
        evidence=tuple(evidence),
        recommendation=f"{action}; {said}."
        + ("" if eagle_served else " No server on this host serves EAGLE now, so nothing pays it yet."),
        sources=tuple(sources),
        saving_us_per_step=saving.us_per_step if saving else None,
        action=step,
    )


def _measure_here(host: HostResult) -> str:
    """How to measure the saving on this host: `--deep` only where a GPU is free and the bench has not run (a
    --deep run that measured nothing says why instead of asking for itself again)."""
    bench = host.probes.get("copy_bench")
    if bench is not None and bench.status == "ok":
        return "this run's copy bench gave no figure for these paths here"
    if bench is not None:
        why = bench.reason or str(as_dict(bench.error).get("message") or "") or "no reason given"
        return f"this run's copy bench measured nothing here ({bench.status}: {why})"
    blocked = room(host).blocked()
    if blocked:
        return f"no GPU here is free to measure it ({blocked}): measure on a drained host of the same build"
    return "run `gpudiag scan --deep` to measure it here"


# In a per-tensor replay hidden_states is one copy_() among the others; batched releases keep it that way.
ROLE_TEXT = {
    "hidden_states_copy": "hidden_states, a plain copy_() like every input here; batched releases keep "
    "this one a plain copy_() (the DMA engine suits a large contiguous tensor)",
    "grouped_copy": "a grouped foreach copy",
}
# Copies a batched release does not put in its foreach group: hidden_states stays a DMA copy_(), and *_cpu
# tensors are host-side copies.
NOT_BATCHED = ("hidden_states",)


def batchable_fields(fact: dict[str, Any]) -> list[str]:
    """The per-tensor copied fields a batched release (0.5.14+) copies in one grouped foreach call."""
    return [
        str(f)
        for f in as_list(fact.get("per_tensor_fields"))
        if str(f) not in NOT_BATCHED and not str(f).endswith("_cpu")
    ]


def _path_evidence(host: HostResult, name: str, fact: dict[str, Any]) -> list[Evidence]:
    """The replay method with its per-tensor copies, then each cited line (by role when the probe names one)."""
    fields = batchable_fields(fact)
    others = [str(f) for f in as_list(fact.get("per_tensor_fields")) if str(f) not in fields]
    what = f"{fact.get('class') or 'EAGLE'}.{fact.get('replay_method') or 'replay'} ({name.replace('_', '-')})"
    if fields:
        summary = (
            f"{what} copies {len(fields)} small inputs with one copy_() each where a batched release "
            f"issues one grouped foreach copy: {', '.join(fields)}"
            + (f" (also copied on their own in both: {', '.join(others)})" if others else "")
        )
    else:
        summary = f"{what} copies its inputs with one copy_() each"
    items = [e for e in as_list(fact.get("evidence")) if isinstance(e, dict)]
    if not items:
        return [source_evidence(host, fact, summary)]
    out = []
    for item in items[:3]:
        role = str(item.get("role") or "")
        text = summary if role in ("", "replay_method") and summary else f"{what}: {ROLE_TEXT.get(role, role)}"
        if text == summary:
            summary = ""
        out.append(source_evidence(host, item, text))
    if summary:
        out.insert(
            0,
            Evidence(
                kind="source",
                host=host.name,
                text=summary,
                file=str(fact.get("file") or "") or None,
                line=fact.get("replay_line") if isinstance(fact.get("replay_line"), int) else None,
            ),
        )
    return out


def _saving_evidence(host: HostResult, saving: GpuSaving) -> Evidence:
    """The figures the saving is the sum of: per path, the baseline against the best usable strategy by each clock
    (gpudiag/findings/savings.py ranks and prices)."""
    rows = [
        ("GPU", "path", "batch size", "installed", "best usable (CPU issue / GPU stream)", "best", "saving per replay")
    ]
    for p in saving.priced:
        rows.append(
            (
                saving.gpu,
                p.path,
                str(p.batch_size),
                p.baseline.cost.text() if p.baseline else "-",
                " / ".join(str(b or "-") for b in p.best),
                p.best_cost.text(),
                p.saving.text() if p.saving else "-",
            )
        )
    method = dig(probe(host, "copy_bench"), "method") or "copy_bench"
    return Evidence(
        kind="measurement",
        host=host.name,
        table=tuple(rows),
        text=f"installed replay copies vs the fastest strategy sglang can run by each clock, medians ({method}); one "
        f"replay per path per decode step: {saving.saving.text() if saving.saving else '-'} per step",
    )


def local_modifications(hosts: list[HostResult]) -> list[Finding]:
    """Rule 10: files that differ from the wheel's RECORD, or an editable checkout with local changes."""
    findings = []
    for host in hosts:
        sglang = probe(host, "sglang_source") or {}
        integrity = as_dict(sglang.get("integrity"))
        modified = sorted(str(f) for f in as_list(integrity.get("modified")))
        missing = sorted(str(f) for f in as_list(integrity.get("missing")))
        editable = as_dict(integrity.get("editable"))
        dirty = editable.get("changed") or editable.get("dirty")
        if not modified and not missing and not dirty:
            continue
        evidence = []
        if modified or missing:
            table = (
                (("file", "state"),) + tuple((f, "modified") for f in modified) + tuple((f, "missing") for f in missing)
            )
            evidence.append(
                Evidence(
                    kind="source",
                    host=host.name,
                    table=table,
                    text=f"{len(modified)} modified, {len(missing)} missing: sha256 of each "
                    f"file compared with the wheel's RECORD",
                )
            )
        if dirty:
            changed = ", ".join(str(f) for f in as_list(dirty)) if isinstance(dirty, list) else "uncommitted changes"
            evidence.append(
                Evidence(
                    kind="source",
                    host=host.name,
                    text=f"editable checkout {editable.get('path') or '?'} at commit "
                    f"{editable.get('commit') or '?'} has local changes: {changed}",
                )
            )
        findings.append(
            Finding(
                id="sglang.local_modifications",
                severity="warning",
                title=f"sglang {sglang.get('version') or '?'} on this host is locally modified",
                hosts=(host.name,),
                evidence=tuple(evidence),
                recommendation="Source facts and release notes describe the released code, not these files: review "
                f"the changes, or reinstall the release (`pip install --force-reinstall "
                f"sglang=={sglang.get('version') or '<version>'}`) before comparing this host "
                "with the fleet.",
                sources=(source(host, "sglang_source"),),
                action=f"Review the local changes, or reinstall sglang=={sglang.get('version') or '<version>'}",
            )
        )
    return findings


def torch_other_interpreter(hosts: list[HostResult]) -> list[Finding]:
    """Rule 11: torch facts (env, torch_caps) describe another Python than the one sglang was read from."""
    findings = []
    for host in hosts:
        version, torch_where = torch_facts(host)
        sglang_where = sglang_interpreter(host)
        if not torch_from_other_interpreter(host) or not version or torch_where is None or sglang_where is None:
            continue  # only a torch that was really read, in a Python other than the serving one
        (sglang_path, why), (torch_path, torch_why) = sglang_where, torch_where
        findings.append(
            Finding(
                id="sglang.torch_other_interpreter",
                severity="warning",
                title=f"torch {version} was read in {torch_path}, not in the Python whose sglang was read",
                hosts=(host.name,),
                evidence=(
                    Evidence(
                        kind="text",
                        host=host.name,
                        text=f"sglang source facts: {sglang_path} (chosen: {why}); torch facts: {torch_path} "
                        f"({torch_why})",
                    ),
                ),
                recommendation="The torch findings (torch._foreach_copy_) are not judged for this host (the answers "
                "say so): they would describe a torch sglang may not run with. Rescan with "
                f"`--python {sglang_path}` so the probes run in the serving interpreter.",
                action=f"Rescan with `--python {sglang_path}`, the interpreter whose sglang was read",
                sources=(source(host, "sglang_source"), source(host, "env"), source(host, "torch_caps")),
            )
        )
    return findings
