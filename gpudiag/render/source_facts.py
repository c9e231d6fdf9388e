"""The appendix's sglang source-facts section: which interpreter and package were read, each fact with its
file:line and snippet, the EAGLE replay copies, the graph-runner classes, the release's graph flags, integrity."""

from __future__ import annotations

from typing import Any, Iterable

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.models import HostResult
from gpudiag.render.blocks import table
from gpudiag.render.safe_text import code, md


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
