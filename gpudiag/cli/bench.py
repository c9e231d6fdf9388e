"""`gpudiag bench TARGETS --concurrency 1,128`: a bounded load on every live sglang server of each target, level
by level, stored as a run of kind "bench" (`gpudiag report` shows it beside Q10's figures from the log).

It loads production servers, so it never runs without this command and an explicit `--concurrency` list; every
level is bounded by `--requests` and the whole load by `--max-seconds`. Ctrl-C (or SIGTERM/SIGHUP) ends the
host's runner, which stops sending at once; finished hosts are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from gpudiag import findings as rules
from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import ResultConsole, inventory_option, load_hosts, reports_dir_option
from gpudiag.cli.runs import StoredRun, run_hosts, transports
from gpudiag.cli.report_stream import FINDINGS_AND_VERDICT
from gpudiag.cli.scan_fold import RunFold
from gpudiag.cli.scan import _stored_run, check_known_hosts_path, skip_unsafe_command_lines
from gpudiag.models import INTERNAL_ERROR, OK
from gpudiag.orchestrator import DEFAULT_TIMEOUT, ScanRequest
from gpudiag.derived import key_of
from gpudiag.render.bench_block import bench_rows, console_table, host_bench_rows
from gpudiag.render.safe_text import console as console_text
from gpudiag.verdict import Verdict, verdict

PROBES = ["deployment", "servingbench"]
MAX_CONCURRENCY = 4096
RUNNER_MARGIN_S = 30.0  # the deployment probe and the log read around the load


def parse_concurrency(text: str) -> list[int]:
    """`1,4,128` → [1, 4, 128]; anything else is a one-line usage error."""
    levels = []
    for word in text.split(","):
        word = word.strip()
        if not word.isdigit() or not 1 <= int(word) <= MAX_CONCURRENCY:
            raise UserError(f"--concurrency: {word!r} is not a whole number from 1 to {MAX_CONCURRENCY}")
        levels.append(int(word))
    return levels


@click.command()
@click.argument("targets", nargs=-1)
@inventory_option
@click.option("--python", help="Interpreter to run the probes with on every target.")
@click.option("--concurrency", required=True, help="Comma-separated concurrency levels, e.g. 1,128 (required).")
@click.option("--requests", type=click.IntRange(1, 100000), default=32, show_default=True, help="Requests per level.")
@click.option(
    "--max-seconds", type=click.FloatRange(1, 3600), default=120.0, show_default=True, help="Limit on the whole load."
)
@click.option("--input-len", type=click.IntRange(1, 131072), default=128, show_default=True, help="Input tokens.")
@click.option("--output-len", type=click.IntRange(1, 131072), default=128, show_default=True, help="Output tokens.")
@click.option("--accept-new", is_flag=True, help="Record unknown host keys (like OpenSSH accept-new).")
@click.option("--known-hosts", type=click.Path(dir_okay=False), help="gpudiag's own known-hosts file.")
@click.option("--json", "as_json", is_flag=True, help="Print the per-level rows as JSON on stdout.")
@reports_dir_option
def bench(
    targets: tuple[str, ...],
    inventory_path: str | None,
    python: str | None,
    concurrency: str,
    requests: int,
    max_seconds: float,
    input_len: int,
    output_len: int,
    accept_new: bool,
    known_hosts: str | None,
    as_json: bool,
    reports_dir: Path,
) -> int:
    """Load every live sglang server of TARGETS on loopback, per concurrency level, and store the figures."""
    levels = parse_concurrency(concurrency)
    hosts = load_hosts(targets, inventory_path, python)
    settings = dict(
        concurrency=levels, requests=requests, max_seconds=max_seconds, input_len=input_len, output_len=output_len
    )
    limit = max_seconds + RUNNER_MARGIN_S
    request = ScanRequest(
        probes=list(PROBES),
        options={"servingbench": settings},
        probe_timeouts={"servingbench": limit},
        timeout=DEFAULT_TIMEOUT + limit,
    )
    console = Console(stderr=True)
    if any(h.transport == "ssh" for h in hosts):
        check_known_hosts_path(known_hosts, accept_new)
    hosts = skip_unsafe_command_lines(hosts, console)
    run = StoredRun(
        reports_dir,
        "bench",
        console,
        planned=[h.name for h in hosts],
        extra={"requested": {"checks": ["servingbench"]}, "bench": settings},
    )
    also = [key_of(host_bench_rows)]  # each host's bench rows, kept as it is stored with what findings read
    run.fold = (fold := RunFold(run.writer.dir, run.writer.manifest, FINDINGS_AND_VERDICT | set(also))).add
    factory = transports(accept_new=accept_new, known_hosts=known_hosts)
    outcome, manifest, stop = run_hosts(run, hosts, request, factory, console)
    stored = _stored_run(run.writer.dir, console, also, folded=None if run.failures else (fold, manifest))
    rows = [] if stored is None else bench_rows(stored)
    # Findings from the log never fail a load; a host with nothing to load is incomplete (exit 4).
    result = None if stored is None else verdict(stored, rules.all_findings(stored), "critical")
    _print_results(rows, result, manifest.run_id, run.writer.dir, as_json)
    if outcome.interrupted:
        console.print(f"interrupted{' by ' + stop.signal_name if stop.signal_name else ''}: finished hosts are kept")
        return ExitCode(stop.exit_code)
    if any(r.status == INTERNAL_ERROR for r in outcome.results):
        return ExitCode.INTERNAL
    if run.failures or result is None:
        return ExitCode.HOSTS_FAILED if any(r.status != OK for r in outcome.results) else ExitCode.INCOMPLETE
    return ExitCode(result.exit_code)


def _print_results(
    rows: list[dict[str, Any]], result: Verdict | None, run_id: str, run_dir: Path, as_json: bool
) -> None:
    """The per-level rows on stdout (JSON or a table), then where the run is and which hosts are incomplete."""
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "rows": rows}, indent=2, sort_keys=True))
        return
    results = ResultConsole()
    results.print(console_table(rows, f"gpudiag bench {run_id}"))
    results.print(f"results: {run_dir}", markup=False, highlight=False)
    for host in result.incomplete if result else ():
        reasons = console_text("; ".join(host.reasons), 1200)
        results.print(f"{console_text(host.name)}: incomplete — {reasons}", markup=False, highlight=False)


__all__ = ["bench", "parse_concurrency", "UserError"]
