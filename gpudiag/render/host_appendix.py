"""The report's appendix: per host, everything the probes read (environment, torch checks, sglang source facts,
servers, copy timings, the CUDA-graph repro matrix), for checking a finding against its raw facts.

A document of its own: `report -o FINDINGS.md` writes it to FINDINGS.appendix.md beside the report; on stdout it
follows the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping
from urllib.parse import quote

from gpudiag.budget import given_text
from gpudiag.findings import agreeing_groups
from gpudiag.probe_view import as_dict, dig, probe
from gpudiag.probe_view import cells
from gpudiag.derived import remembered
from gpudiag.models import HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.render.answers_block import hosts_label
from gpudiag.render.appendix import host_sections
from gpudiag.render.blocks import table
from gpudiag.render.copy_timings import copy_section
from gpudiag.render.generic_section import generic_sections
from gpudiag.render.methodology import methodology
from gpudiag.render.safe_text import code, md

TITLE = "## Appendix: hosts"
WHAT = (
    "per host, the environment, torch checks, sglang source facts (file:line), servers, copy timings and the "
    "CUDA-graph repro matrix"
)


def appendix_path(report: Path) -> Path:
    """FINDINGS.md → FINDINGS.appendix.md, beside the report."""
    return report.with_name(f"{report.stem}.appendix{report.suffix or '.md'}")


def link_line(appendix_name: str | None) -> str:
    """The report's pointer to its appendix: a relative link to the file, or 'below' when they share a stream."""
    if appendix_name is None:
        return f"- Appendix: at the end of this document ({WHAT}); `-o FILE.md` writes it to FILE.appendix.md."
    return f"- Appendix: {_link(appendix_name)} — {WHAT}."


def render_appendix(run: LoadedRun, charts: Mapping[str, str]) -> list[str]:
    """The appendix's sections; [] for a run without hosts (a classified log)."""
    return list(appendix_lines(run, charts))


def appendix_lines(run: LoadedRun, charts: Mapping[str, str]) -> Iterator[str]:
    """render_appendix's lines, one group of hosts at a time: a fleet's appendix is written as it is rendered,
    never held whole."""
    if not run.hosts:
        return
    yield from [
        TITLE,
        "",
        "What each probe read on each host, as recorded: the report's findings cite these facts; "
        "a section is absent where its probe did not run.",
        "",
    ]
    for members in agreeing_groups(run.hosts):  # hosts that read the same data: one section
        host = members[0]
        yield from [
            f"### {md(host.name if len(members) == 1 else hosts_label([h.name for h in members]))}",
            "",
            f"Status: {md(host.status)}" + (f" — {md(host.reason)}" if host.reason else ""),
            "",
        ]
        if len(members) > 1:
            yield from [f"These {len(members)} hosts read the same data; shown as {md(host.name)} read it.", ""]
        yield from host_detail(host, charts)
    yield from methodology(run)


def appendix_document_lines(run: LoadedRun, charts: Mapping[str, str], report_name: str) -> Iterator[str]:
    """The appendix as a file of its own, with a title that names its run and links back to the report: its
    lines as they are rendered (cli/report.py writes them joined with newlines, trailing blank lines dropped)."""
    yield from [
        f"# gpudiag report appendix — run {md(run.manifest.run_id)}",
        "",
        f"The report: {_link(report_name)}.",
        "",
    ]
    yield from appendix_lines(run, charts)


def _link(name: str) -> str:
    """A relative link to a file beside this one; the name as a code span, so no bracket in it ends the link."""
    return f"[{code(name)}]({quote(name)})"


@remembered(compressed=True)  # text, read once, the largest result a host keeps
def host_detail(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    """One host's probe list and sections; data that cannot be read costs this host's section only."""
    try:
        lines = []
        if host.probes:
            lines += [
                "Probes: "
                + "; ".join(
                    f"{md(name)} {md(p.status)} ({float(p.duration_s):.1f} s"
                    + (f", {given_text(p)}" if given_text(p) else "")
                    + (
                        f": {md(p.reason or dig(p.error, 'message'), 300)})"
                        if p.reason or dig(p.error, "message")
                        else ")"
                    )
                    for name, p in sorted(host.probes.items())
                )
                + ".",
                "",
            ]
        lines += host_sections(host)
        for section in (copy_section(host, charts), _repro_matrix(host, charts), generic_sections(host)):
            lines += section
        return lines
    except Exception as exc:  # noqa: BLE001 - one host's odd data never breaks the fleet's report
        return [
            f"This host's data could not be read ({type(exc).__name__}: {md(exc, 200)}); the other hosts' "
            "sections stand.",
            "",
        ]


def _repro_matrix(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    found = cells(host)
    if not found:
        return []
    data = probe(host, "cuda_graph") or {}
    gpu = as_dict(data.get("gpu"))
    sizes = sorted({int(c["batch_size"]) for c in found if isinstance(c.get("batch_size"), int)})
    keys = sorted({(str(c.get("path")), str(c.get("draft_tokens", "-"))) for c in found})
    status = {
        (str(c.get("path")), str(c.get("draft_tokens", "-")), c.get("batch_size")): str(c.get("status")) for c in found
    }
    rows: list[tuple[Any, ...]] = [("path", "draft tokens") + tuple(f"bs {s}" for s in sizes)]
    rows += [k + tuple(status.get(k + (s,), "-") for s in sizes) for k in keys]
    where = (
        f"on GPU {gpu.get('index', '-')} {gpu.get('name', '-')} ({gpu.get('compute_capability', '-')})"
        if gpu
        else f"not run: {data.get('skip_reason') or 'no GPU was chosen'}"
    )
    lines = ["#### CUDA-graph repro matrix", "", f"{md(data.get('mode', '-'))} mode {md(where)}.", ""] + table(rows)
    if dig(data, "boundary", "text"):
        lines += [f"Boundary: {md(dig(data, 'boundary', 'text'))}", ""]
    if charts.get(f"repro:{host.name}"):
        lines += [
            f"![repro matrix, {md(host.name)}]({md(charts[f'repro:{host.name}'])})",
            f"*{md(charts.get(f'repro:{host.name}:caption') or '')}*",
            "",
        ]
    elif charts.get(f"repro:{host.name}:not_drawn"):
        lines += [f"Heat map not drawn: {md(charts[f'repro:{host.name}:not_drawn'])}.", ""]
    return lines
