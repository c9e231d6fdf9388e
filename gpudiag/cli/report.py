"""`gpudiag report [RUN]`: findings for a stored run, as a console summary, markdown or JSON."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import reports_dir_option
from gpudiag.findings import all_findings, has_errors
from gpudiag.findings.facts import host_facts
from gpudiag.models import Finding
from gpudiag.render.json_report import render_json
from gpudiag.render.markdown import render_markdown
from gpudiag.render import plots
from gpudiag.models import LoadedRun
from gpudiag.store import StoreError, load_run, resolve_run_dir

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


@click.command()
@click.argument("run", required=False)
@click.option("--markdown", "as_markdown", is_flag=True, help="Write the full report as markdown.")
@click.option("--json", "as_json", is_flag=True, help="Print findings and summary as JSON (docs/report-json.md).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the markdown (or JSON) here instead of stdout; charts go beside it.")
@click.option("--no-charts", is_flag=True, help="Tables only, even when matplotlib is installed.")
@reports_dir_option
def report(run: str | None, as_markdown: bool, as_json: bool, output: Path | None, no_charts: bool,
           reports_dir: Path) -> None:
    """Findings for RUN (a run directory or id; default: the latest run)."""
    if as_markdown and as_json:
        raise UserError("--markdown and --json: choose one")
    try:
        loaded = load_run(resolve_run_dir(run, reports_dir))
    except StoreError as exc:
        raise UserError(str(exc)) from None
    findings = all_findings(loaded)
    if as_json:
        _emit(render_json(loaded, findings), output)
    elif as_markdown:
        charts = {}
        if output is not None and not no_charts:
            charts = plots.write_charts(loaded, output.parent)
            if not plots.charts_available():
                click.echo("charts: matplotlib not installed (pip install 'gpudiag[plots]'); tables only",
                           err=True)
        _emit(render_markdown(loaded, findings, charts), output)
    else:
        _console_summary(loaded, findings)
    problems = loaded.problems()   # a run that is not a whole record never reads as all clear
    for line in problems:
        click.echo(f"gpudiag: {line}", err=True)
    sys.exit(ExitCode.HOSTS_FAILED if problems else ExitCode.FINDINGS if has_errors(findings) else ExitCode.OK)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{output}: cannot write: {exc.strerror or exc}") from None
    click.echo(f"report: {output}", err=True)


def _console_summary(run: LoadedRun, findings: Sequence[Finding]) -> None:
    console = Console()
    hosts = Table(title=Text(f"gpudiag run {run.manifest.run_id} ({run.manifest.started_at[:10] or '-'})"))
    for column in ("host", "status", "GPUs", "torch", "sglang", "speculative", "CUDA graphs (decode)"):
        hosts.add_column(column, overflow="fold")
    for h in run.hosts:
        f = host_facts(h)
        torch = f"{f.torch} (another Python than sglang's)" if f.torch_elsewhere else f.torch
        # Host-provided text is plain text: a name or version holding "[...]" is not rich markup.
        hosts.add_row(*(Text(str(v)) for v in (f.name, f.status, f.gpus, torch, f.sglang, f.speculative,
                                                f.cuda_graphs)))
    console.print(hosts)
    if not findings:
        console.print("no findings")
        return
    table = Table(title=f"{len(findings)} finding{'' if len(findings) == 1 else 's'}")
    for column in ("severity", "finding", "hosts", "rule"):
        table.add_column(column, overflow="fold")
    for f in findings:
        style = SEVERITY_STYLE.get(f.severity, "")
        table.add_row(Text(f.severity, style=style), Text(f.title), Text(", ".join(f.hosts) or "fleet"), Text(f.id))
    console.print(table)
    console.print("full report: gpudiag report --markdown -o FINDINGS.md", style="dim")


