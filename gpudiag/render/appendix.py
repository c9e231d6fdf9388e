"""The per-host appendix sections that describe what the probes read: environment, torch capabilities, sglang
source facts and the running servers. Tables, one row per fact, every list sorted."""

from __future__ import annotations

import re
from typing import Any, Iterable

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings import command_line, copy_path_text, host_facts, release_of, scope, servers_of, torch_facts
from gpudiag.models import HostResult
from gpudiag.render.blocks import fenced, table
from gpudiag.render.safe_text import code, md

TORCH_CHECKS = ("mixed_pairs_one_call", "non_contiguous", "mismatched_shapes", "non_blocking")


def host_sections(host: HostResult) -> list[str]:
    lines: list[str] = []
    for section in (environment(host), torch_capabilities(host), source_facts(host), deployment(host)):
        lines += section
    return lines


def environment(host: HostResult) -> list[str]:
    env = probe(host, "env")
    if env is None:
        return []
    f = host_facts(host)
    python = as_dict(env.get("python"))
    torch = as_dict(env.get("torch"))
    rows: list[tuple[Any, ...]] = [
        ("fact", "value"),
        ("hostname", env.get("hostname")),
        ("os", env.get("os")),
        ("kernel", env.get("kernel")),
        ("CPUs", env.get("cpu_count")),
        ("memory", f"{env['memory_total_mib']} MiB" if env.get("memory_total_mib") else None),
        (
            "python (probes)",
            f"{python.get('version', '-')} "
            f"({python.get('executable', '-')})" + (", venv" if python.get("venv") else ""),
        ),
        (
            "torch",
            f.torch + (f" (CUDA {torch['cuda']})" if torch.get("cuda") else "")
            if torch.get("available", True)
            else f"not available: {torch.get('reason')}",
        ),
        ("compute capability", f.compute_capability),
        ("topology", dig(env, "topology", "summary")),
    ]
    # One line of facts: the fleet table already has GPUs, driver, torch and sglang.
    lines = [
        "#### Environment",
        "",
        "; ".join(f"{label} {md(value)}" for label, value in rows[1:] if value not in (None, "", "-")) + ".",
        "",
    ]
    if f.torch_elsewhere:
        lines += [
            "torch was read in another Python than sglang: the torch facts may not describe the torch the "
            "server runs with.",
            "",
        ]
    devices = [d for d in as_list(dig(env, "gpus", "devices")) if isinstance(d, dict)]
    if devices:  # one table, a column per GPU
        lines += table(
            [
                ("GPU",) + tuple(str(d.get("index")) for d in devices),
                ("PCI bus",) + tuple(str(d.get("pci_bus_id") or "-").split(":", 1)[-1] for d in devices),
                ("memory used (MiB)",)
                + tuple(f"{d.get('memory_used_mib', '-')} / {d.get('memory_total_mib', '-')}" for d in devices),
                ("processes",)
                + tuple(
                    ", ".join(
                        f"{p.get('name')} ({p.get('pid')})" for p in as_list(d.get("processes")) if isinstance(p, dict)
                    )
                    or "-"
                    for d in devices
                ),
            ]
        )
    elif dig(env, "gpus", "reason"):
        lines += [f"GPUs: {md(dig(env, 'gpus', 'status'))} — {md(dig(env, 'gpus', 'reason'))}", ""]
    return lines


def torch_capabilities(host: HostResult) -> list[str]:
    caps = probe(host, "torch_caps")
    if caps is None:
        return []
    version, interpreter = torch_facts(host)
    has = caps.get("has_foreach_copy")
    lines = [
        "#### torch capabilities",
        "",
        f"torch {md(caps.get('torch_version') or version or '-')}: torch._foreach_copy_ "
        f"{'present' if has else 'absent' if has is False else 'unknown'}; read in "
        f"{md(interpreter[0] + ' (' + interpreter[1] + ')') if interpreter else '-'}; pairs written "
        f"{md(caps.get('pair_order') or 'src->dst')}.",
        "",
    ]
    said = scope(host, interpreter[0] if interpreter else None, "torch facts")
    lines += [md(said[0].upper() + said[1:]) + ".", ""] if said else []
    checks = sorted(as_dict(caps.get("checks")).items(), key=lambda kv: _device_key(kv[0]))
    if checks:
        # Which copy ran (fast multi_tensor_apply or per-tensor), where torch_caps recorded it.
        with_paths = any(copy_path_text(as_dict(check)) for _, check in checks)
        rows: list[tuple[Any, ...]] = [
            ("device", "status", "dtype pairs ok") + TORCH_CHECKS + (("copy path",) if with_paths else ()) + ("note",)
        ]
        grouped: dict[tuple[Any, ...], list[str]] = {}
        for device, check in checks:
            check = as_dict(check)
            pairs = as_dict(check.get("pairs"))
            ok = sum(1 for v in pairs.values() if v == "ok")
            # Devices that read the same (busy GPUs differ only in the pid) share one row.
            note = re.sub(r",? e\.g\. pid \d+", "", str(check.get("reason") or ""))
            row = (
                (check.get("status") or ("ok" if check.get("ok") else "-"), f"{ok} of {len(pairs)}" if pairs else "-")
                + tuple(_short(check.get(name)) for name in TORCH_CHECKS)
                + ((copy_path_text(check) or "-",) if with_paths else ())
                + (note,)
            )
            grouped.setdefault(row, []).append(device)
        rows += [(", ".join(devices),) + row for row, devices in grouped.items()]
        lines += table(rows)
    return lines


def _device_key(name: str) -> tuple[int, int, str]:
    kind, _, index = name.partition(":")
    return (0 if kind == "cpu" else 1, int(index) if index.isdigit() else -1, name)


def _short(outcome: Any) -> str:
    """'ok', or the outcome's first clause ('raises: RuntimeError')."""
    if outcome in (None, ""):
        return "-"
    text = str(outcome)
    return text if text == "ok" else text.split(":")[0] + (": " + text.split(":")[1].strip() if ":" in text else "")


def _fact_rows(items: Iterable[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for what, fact in items:
        fact = as_dict(fact)
        where = f"{fact.get('file')}:{fact.get('line')}" if fact.get("file") else "-"
        rows.append((what, where, fact.get("snippet") or ""))
    return rows


def source_facts(host: HostResult) -> list[str]:
    sg = probe(host, "sglang_source")
    if sg is None:
        return []
    chosen = as_dict(sg.get("interpreter"))  # recorded even when sglang was not found there
    origin = (
        f"Read from {code(chosen['path'])} (chosen: {md(chosen.get('why') or '-')})"
        if chosen.get("path")
        else "Interpreter not recorded"
    )
    if sg.get("found") is False:
        return ["#### Source facts (sglang)", "", f"{origin}. sglang not found: {md(sg.get('reason') or '-')}", ""]
    lines = [
        "#### Source facts (sglang)",
        "",
        f"{origin}: package {code(sg.get('package_dir') or '-')} under {code(sg.get('site_packages') or '-')}; "
        f"speculative algorithms: {md(', '.join(map(str, as_list(sg.get('speculative_algorithms')))) or '-')}.",
        "",
    ]
    lines += table([("fact", "file:line", "snippet")] + _fact_rows(_source_items(sg)))
    lines += _eagle_table(sg) + _classes(sg) + _flags(sg) + _integrity(sg)
    return lines


def _source_items(sg: dict[str, Any]) -> list[tuple[str, Any]]:
    grouped = as_dict(sg.get("grouped_foreach_copy"))
    items: list[tuple[str, Any]] = [(f"version {sg.get('version') or '-'}", sg.get("version_source"))]
    items += [(f"_grouped_foreach_copy_ in {d.get('module')}", d) for d in as_list(grouped.get("definitions"))]
    items += [
        (f"fast path {p.get('kind')}", p)
        for d in as_list(grouped.get("definitions"))
        for p in as_list(dig(d, "fast_paths"))
    ]
    items += [("hasattr(torch, '_foreach_copy_')", f) for f in as_list(grouped.get("has_foreach_copy_flag"))]
    for c in (c for c in as_list(grouped.get("call_sites")) if isinstance(c, dict)):
        target = as_dict(c.get("resolves_to"))
        resolves = f" → {target.get('module')}" if target.get("module") else " → unresolved"
        items.append((f"call {c.get('qualname')} ({', '.join(map(str, as_list(c.get('fields'))))}){resolves}", c))
    items += [
        (f"DFlash guard: {g.get('message') or g.get('condition')}", g)
        for g in as_list(dig(sg, "dflash", "draft_graph_guards"))
    ]
    return items


def _eagle_table(sg: dict[str, Any]) -> list[str]:
    rows: list[tuple[Any, ...]] = [
        ("EAGLE path", "replay", "copies", "grouped (one foreach call)", "one copy_() each", "hidden_states separate")
    ]
    for name, fact in sorted(as_dict(sg.get("eagle")).items()):
        fact = as_dict(fact)
        where = f"{fact.get('file')}:{fact.get('replay_line') or fact.get('line')}" if fact.get("file") else "-"
        state = "batched" if fact.get("batched") else "per tensor" if fact.get("batched") is False else "absent"
        flag = fact.get("hidden_states_separate")
        separate = "yes" if flag is True else "no" if flag is False else "-"
        rows.append(
            (
                name.replace("_", "-"),
                f"{fact.get('class')}.{fact.get('replay_method')} ({where})",
                state,
                ", ".join(map(str, as_list(fact.get("grouped_fields")))) or "-",
                ", ".join(map(str, as_list(fact.get("per_tensor_fields")))) or "-",
                separate,
            )
        )
    return table(rows) if len(rows) > 1 else []


def _classes(sg: dict[str, Any]) -> list[str]:
    runners = sorted({str(r.get("class")) for r in as_list(sg.get("cuda_graph_runners")) if isinstance(r, dict)})
    breakable = sorted({str(b.get("name")) for b in as_list(sg.get("breakable_graph")) if isinstance(b, dict)})
    return [
        f"Graph-runner classes ({len(runners)}): {md(', '.join(runners), 2000) or 'none found'}.",
        "",
        f"Breakable-graph helpers ({len(breakable)}): {md(', '.join(breakable), 2000) or 'none found'}.",
        "",
    ]


def _flags(sg: dict[str, Any]) -> list[str]:
    """The release's CUDA-graph flags by name, the other speculative flags counted, deprecated aliases mapped."""
    flags = [f for f in as_list(sg.get("server_flags")) if isinstance(f, dict) and f.get("name")]
    if not flags:
        return []
    current = sorted({str(f["name"]) for f in flags if not f.get("deprecated")})
    graph = [n for n in current if "graph" in n]
    aliases = sorted({(str(f["name"]), str(f.get("alias_of") or "-")) for f in flags if f.get("deprecated")})
    lines = [
        f"Server flags: {len(current)} current ones for graphs and speculative decoding, of which the CUDA-graph "
        f"flags are {', '.join(code(n) for n in graph) or 'none'}; {len(aliases)} deprecated.",
        "",
    ]
    if aliases:
        lines += table([("deprecated flag", "use instead")] + aliases)
    return lines


def _integrity(sg: dict[str, Any]) -> list[str]:
    integrity = as_dict(sg.get("integrity"))
    if not integrity:
        return []
    scope = (
        " (only the files the facts above cite; hash every file with `gpudiag scan --verify-all`, or "
        "`--set sglang_source.verify_all=true`)"
        if integrity.get("scope") == "cited"
        else " (every file)"
        if integrity.get("scope") == "all"
        else ""
    )
    editable = (
        f"; editable checkout {md(dig(integrity, 'editable', 'path'))} at {md(dig(integrity, 'editable', 'commit'))}"
        if dig(integrity, "editable", "path")
        else ""
    )
    return [
        f"Integrity ({md(integrity.get('method', '-'))}): {md(integrity.get('checked', '-'))} files checked{scope}, "
        f"{len(as_list(integrity.get('modified')))} modified, {len(as_list(integrity.get('missing')))} missing"
        f"{editable}.",
        "",
    ]


def deployment(host: HostResult) -> list[str]:
    data = probe(host, "deployment")
    if data is None:
        return []
    chosen = as_dict(data.get("interpreter"))
    lines = ["#### Deployment", ""]
    if chosen.get("path"):
        lines += [
            f"Serving interpreter: {code(chosen['path'])} (chosen: {md(chosen.get('why') or '-')}"
            + (f", server pid {md(chosen['pid'])}" if chosen.get("pid") else "")
            + ")"
            + (f"; {md(chosen['note'])}" if chosen.get("note") else "")
            + ".",
            "",
        ]
    servers = servers_of(host)
    if not servers:
        return lines + ["No running sglang server found.", ""]
    for s in servers:
        visible = s.get("cuda_visible_devices") or dig(s, "env", "CUDA_VISIBLE_DEVICES")
        release = f"; {md(release_of(s))}" if len(servers) > 1 else ""
        lines += [
            f"Server pid {md(s.get('pid', '-'))} ({md(s.get('python') or '-')}{release}), CUDA_VISIBLE_DEVICES="
            f"{md(visible) if visible not in (None, '') else 'unset (every GPU)'}:",
            "",
        ]
        lines += fenced(None, None, command_line(s), "")
    return lines
