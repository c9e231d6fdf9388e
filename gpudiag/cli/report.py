"""`gpudiag report [RUN]`: findings for a stored run, as a console summary, markdown or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import reports_dir_option
from gpudiag.cli.table_console import table_console
from gpudiag.findings import all_findings, host_facts
from gpudiag.models import SEVERITIES, Finding
from gpudiag.render.bench_block import bench_rows, console_table
from gpudiag.render.json_report import render_json
from gpudiag.render.host_appendix import appendix_document_lines, appendix_path
from gpudiag.render.markdown import render_markdown
from gpudiag.render import plots
from gpudiag.run_records import LoadedRun
from gpudiag.render.answers_block import AnswerSet, answer_set, console_rows, host_list, hosts_label
from gpudiag.render.safe_text import clean_run, console as console_text
from gpudiag.render.ssh_line import ssh_settings_line
from gpudiag.jsonfile import cycle_collector_paused
from gpudiag.cli.forked_map import MOST_WORKERS, beside, usable_cpus
from gpudiag.store import StoreError
from gpudiag.run_loader import resolve_run_dir
from gpudiag.cli.report_stream import CHUNK, for_output, streamed_run
from gpudiag.cli.fail_on import fail_on_option
from gpudiag.verdict import Verdict, verdict as compute_verdict

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


@click.command()
@click.argument("run", required=False)
@click.option("--markdown", "as_markdown", is_flag=True, help="Write the full report as markdown.")
@click.option("--json", "as_json", is_flag=True, help="Print findings and summary as JSON (docs/report-json.md).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write the report here, markdown for .md and JSON for .json unless a format flag says; "
    "`-` is stdout. A markdown FILE.md gets its per-host appendix in FILE.appendix.md and its "
    "charts beside it; on stdout the appendix follows the report.",
)
@click.option(
    "--severity",
    type=click.Choice(SEVERITIES),
    metavar="LEVEL",
    help=f"Show only findings at LEVEL or worse ({', '.join(SEVERITIES)}).",
)
@click.option("--no-charts", is_flag=True, help="Tables only, even when matplotlib is installed.")
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    metavar="N",
    help="Worker processes that read and judge the run's hosts (default: one per CPU this process may use, "
    "within its cgroup's CPU quota, at most 8).",
)
@fail_on_option
@reports_dir_option
@cycle_collector_paused()  # the run is read and rendered once: no collection would find a cycle in it
def report(
    run: str | None,
    as_markdown: bool,
    as_json: bool,
    output: Path | None,
    severity: str | None,
    no_charts: bool,
    jobs: int | None,
    fail_on: str,
    reports_dir: Path,
) -> int:
    """Findings for RUN (a run directory or id; default: the latest run)."""
    as_markdown, as_json = output_format(as_markdown, as_json, output)
    if output is not None and str(output) == "-":
        output = None
    drawn = output is not None and as_markdown and not no_charts
    workers = jobs or min(usable_cpus(), MOST_WORKERS)
    try:
        streamed, charts = streamed_run(
            resolve_run_dir(run, reports_dir),
            output.parent if drawn and output else None,
            for_output(as_markdown),
            workers,
        )
        loaded = clean_run(streamed)
    except StoreError as exc:
        raise UserError(str(exc)) from None
    if drawn and not plots.charts_available():
        click.echo("charts: matplotlib not installed (pip install 'gpudiag[plots]'); tables only", err=True)
    appendix = _appendix_writer(loaded, charts, output) if as_markdown and output is not None else None
    # FILE.appendix.md written meanwhile by a process of its own, for a run of more than one chunk of hosts
    with beside(appendix, fork=workers > 1 and len(loaded.hosts) > CHUNK):
        every_finding = all_findings(loaded)
        verdict = compute_verdict(loaded, every_finding, fail_on)  # the exit code counts every finding
    if appendix and output:  # said here: a process of its own writes to its own copy of the streams
        click.echo(f"appendix: {appendix_path(output)}", err=True)
    findings = at_least(every_finding, severity) if severity else every_finding
    if as_json:
        _emit(render_json(loaded, findings, verdict), output)
    elif as_markdown:
        if output is None:  # one stream: the appendix follows the report
            _emit(render_markdown(loaded, findings, charts, verdict), None)
        else:
            linked = appendix_path(output).name if appendix else None
            _emit(render_markdown(loaded, findings, charts, verdict, appendix_name=linked), output)
    else:
        hidden = len(every_finding) - len(findings)
        _console_summary(loaded, findings, verdict, f"{hidden} below {severity} not shown" if hidden else "")
    problems = loaded.problems()  # a run that is not a whole record never reads as all clear
    for line in problems:
        click.echo(f"gpudiag: {line}", err=True)
    return ExitCode.HOSTS_FAILED if problems else ExitCode(verdict.exit_code)  # 3 outranks every other verdict


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
    raise UserError(
        f"-o {output}: cannot tell the format from the extension; name it .md or .json, or add --markdown or --json"
    )


def at_least(findings: list[Finding], severity: str) -> list[Finding]:
    """Findings at `severity` or worse."""
    worst_first = list(SEVERITIES)
    return [
        f
        for f in findings
        if f.severity in worst_first and worst_first.index(f.severity) <= worst_first.index(severity)
    ]


def _emit(text: str, output: Path | None, label: str = "report") -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{output}: cannot write: {exc.strerror or exc}") from None
    click.echo(f"{label}: {output}", err=True)


def _emit_lines(lines: Iterable[str], output: Path) -> None:
    """Write '\n'.join(lines).rstrip('\n') + '\n' to `output` a batch of lines at a time as they come."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("w", encoding="utf-8") as out:
            pending, first = "", True
            for batch in _batches(lines, 4096):  # a write per batch: a 10,000-host appendix is over a million lines
                text = "\n".join(batch) if first else "\n" + "\n".join(batch)
                first = False
                kept = text.rstrip("\n")
                if kept:
                    out.write(pending + kept)
                    pending = text[len(kept) :]
                else:
                    pending += text
            out.write("\n")
    except OSError as exc:
        raise UserError(f"{output}: cannot write: {exc.strerror or exc}") from None


def _batches(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _appendix_writer(run: LoadedRun, charts: dict[str, str], output: Path) -> Callable[[], None] | None:
    """What writes the report's appendix (FILE.appendix.md, which the report links to); None for a run with no
    hosts, whose report has no appendix."""
    if not run.hosts:
        return None
    return lambda: _emit_lines(appendix_document_lines(run, charts, output.name), appendix_path(output))


def _console_summary(run: LoadedRun, findings: Sequence[Finding], verdict: Verdict, hidden: str = "") -> None:
    console = table_console()  # piped: rows stay whole lines, so `| grep WORD` finds whole words
    answers = print_answers(console, run)
    bench = bench_rows(run)
    if bench:  # a `gpudiag bench` run: its levels beside Q10's figures from the log
        console.print(console_table(bench, "Bench load (streamed /generate on loopback)"))
    hosts = Table(
        title=Text(
            f"gpudiag run {console_text(run.manifest.run_id)} ({console_text(run.manifest.started_at[:10] or '-')})"
        )
    )
    for column in ("host", "status", "GPUs", "torch", "sglang", "speculative", "CUDA graphs (decode)"):
        hosts.add_column(column, overflow="fold")
    # Host-provided text is plain, cleaned text: a name or version holding "[...]" is not rich markup.
    for names, row in console_host_rows(run, verdict):
        hosts.add_row(*(Text(console_text(v, 2000)) for v in (hosts_label(names),) + row))
    console.print(hosts)
    ssh_line = ssh_settings_line(run.manifest.extra)
    if ssh_line:
        console.print(Text(console_text(ssh_line, 2000)))
    for names, reasons in incomplete_groups(verdict):
        console.print(
            Text(f"{console_text(hosts_label(names), 2000)} incomplete: {console_text(reasons, 1200)}"), style="yellow"
        )
    print_verdict(console, findings, verdict, answers)
    if hidden:
        console.print(hidden, style="dim")


def console_host_rows(run: LoadedRun, verdict: Verdict) -> list[tuple[list[str], tuple[str, ...]]]:
    """(host names, row) per distinct row: hosts that agree in status, GPUs, torch, sglang, speculation and
    graphs are one row with their count and names, as the markdown fleet table folds them."""
    status = {h.name: h.status for h in verdict.hosts}
    rows: dict[tuple[str, ...], list[str]] = {}
    for h in run.hosts:
        f = host_facts(h)
        torch = f"{f.torch} (another Python than sglang's)" if f.torch_elsewhere else f.torch
        row = (status.get(h.name, f.status), f.gpus, torch, f.sglang, f.speculative, f.cuda_graphs)
        rows.setdefault(tuple(str(v) for v in row), []).append(f.name)
    return [(names, row) for row, names in rows.items()]


def incomplete_groups(verdict: Verdict) -> list[tuple[list[str], str]]:
    """(host names, reasons) for incomplete hosts, those whose reasons read the same (their own name as
    HOST) folded into one."""
    groups: dict[str, list[str]] = {}
    for host in verdict.incomplete:
        groups.setdefault("; ".join(host.reasons).replace(host.name, "HOST"), []).append(host.name)
    return [
        (names, reasons if len(names) > 1 else reasons.replace("HOST", names[0])) for reasons, names in groups.items()
    ]


def print_answers(console: Console, run: LoadedRun) -> AnswerSet:
    answers = answer_set(run)
    table = Table(title=Text(f"Answers — {answers.coverage}"), show_lines=False)
    for column in ("Q", "hosts", "answer"):
        table.add_column(column, overflow="fold")
    for qid, hosts, text in console_rows(answers):
        style = "yellow" if text.startswith("not checked") else ""
        table.add_row(Text(qid), Text(console_text(hosts)), Text(console_text(text, 1200), style=style))
    console.print(table)
    return answers


def print_verdict(console: Console, findings: Sequence[Finding], verdict: Verdict, answers: AnswerSet) -> None:
    console.print(Text(f"coverage: {answers.coverage}"))
    if not findings:
        unchecked = bool(verdict.incomplete) or answers.unchecked
        console.print(
            "no findings among the checks that ran; not everything was checked (see Answers)"
            if unchecked
            else "no findings: every question was answered"
        )
    else:
        table = Table(title=f"{len(findings)} finding{'' if len(findings) == 1 else 's'}")
        for column in ("severity", "finding", "hosts", "rule"):
            table.add_column(column, overflow="fold")
        for f in findings:
            style = SEVERITY_STYLE.get(f.severity, "")
            table.add_row(
                Text(f.severity, style=style),
                Text(console_text(f.title)),
                Text(console_text(host_list(f.hosts)) if f.hosts else "fleet"),
                Text(f.id),
            )
        console.print(table)
    console.print(
        Text(
            f"exit {int(verdict.exit_code)} (--fail-on {verdict.fail_on}); "
            "full report: gpudiag report --markdown -o FINDINGS.md"
        ),
        style="dim",
    )
