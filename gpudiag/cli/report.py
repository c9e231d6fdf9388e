"""`gpudiag report [RUN]`: findings for a stored run, as a console summary, markdown or JSON."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import click
from rich.table import Table
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import ResultConsole, reports_dir_option
from gpudiag.findings import all_findings, has_errors
from gpudiag.findings.facts import host_facts
from gpudiag.models import SEVERITIES, Finding
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
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="Write the report here, markdown for .md and JSON for .json unless a format flag says; "
                   "`-` is stdout. Charts go beside a markdown file.")
@click.option("--severity", type=click.Choice(SEVERITIES), metavar="LEVEL",
              help=f"Show only findings at LEVEL or worse ({', '.join(SEVERITIES)}).")
@click.option("--no-charts", is_flag=True, help="Tables only, even when matplotlib is installed.")
@reports_dir_option
def report(run: str | None, as_markdown: bool, as_json: bool, output: Path | None, severity: str | None,
           no_charts: bool, reports_dir: Path) -> int:
    """Findings for RUN (a run directory or id; default: the latest run)."""
    as_markdown, as_json = output_format(as_markdown, as_json, output)
    if output is not None and str(output) == "-":
        output = None
    try:
        loaded = load_run(resolve_run_dir(run, reports_dir))
    except StoreError as exc:
        raise UserError(str(exc)) from None
    every_finding = all_findings(loaded)
    findings = at_least(every_finding, severity) if severity else every_finding
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
        hidden = len(every_finding) - len(findings)
        _console_summary(loaded, findings, f"{hidden} below {severity} not shown" if hidden else "")
    return ExitCode.FINDINGS if has_errors(every_finding) else ExitCode.OK


def output_format(as_markdown: bool, as_json: bool, output: Path | None) -> tuple[bool, bool]:
    """(markdown, json): the flag given, else what -o's extension says; `-o -` alone is markdown."""
    if as_markdown and as_json:
        raise UserError("--markdown and --json: choose one")
    if as_markdown or as_json or output is None:
        return as_markdown, as_json
    suffix = output.suffix.lower()
    if str(output) == "-" or suffix in (".md", ".markdown"):
        return True, False
    if suffix == ".json":
        return False, True
    raise UserError(f"-o {output}: cannot tell the format from the extension; name it .md or .json, "
                    f"or add --markdown or --json")


def at_least(findings: list[Finding], severity: str) -> list[Finding]:
    """Findings at `severity` or worse (the exit code still counts every finding)."""
    worst_first = list(SEVERITIES)
    return [f for f in findings if f.severity in worst_first
            and worst_first.index(f.severity) <= worst_first.index(severity)]


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


def _console_summary(run: LoadedRun, findings: Sequence[Finding], hidden: str = "") -> None:
    console = ResultConsole()
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
        console.print(f"no findings{f' shown ({hidden})' if hidden else ''}")
        return
    table = Table(title=f"{len(findings)} finding{'' if len(findings) == 1 else 's'}")
    for column in ("severity", "finding", "hosts", "rule"):
        table.add_column(column, overflow="fold")
    for f in findings:
        style = SEVERITY_STYLE.get(f.severity, "")
        table.add_row(Text(f.severity, style=style), Text(f.title), Text(", ".join(f.hosts) or "fleet"), Text(f.id))
    console.print(table)
    if hidden:
        console.print(hidden, style="dim")
    console.print("full report: gpudiag report --markdown -o FINDINGS.md", style="dim")


