"""`gpudiag scan TARGETS`: run the probe bundle on every target and store one result per host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection

import click
from rich.console import Console

from gpudiag import bundle
from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.ssh_settings import warn_ignored_ssh_settings
from gpudiag.cli.common import (
    RecordedKeys,
    ResultConsole,
    Seconds,
    checked_settings,
    complete_targets,
    inventory_option,
    listed_names,
    load_hosts,
    reports_dir_option,
)
from gpudiag.cli.runs import StoredRun, run_hosts, transports
from gpudiag.cli.scan_fold import RunFold
from gpudiag.cli.signals import StopSignals
from gpudiag import findings as rules
from gpudiag.models import INTERNAL_ERROR, OK, Finding, Host
from gpudiag.run_records import LoadedRun, RunManifest
from gpudiag.budget import given_lines, plan_line
from gpudiag.orchestrator import DEFAULT_FORKS, DEFAULT_TIMEOUT, ScanOutcome, ScanRequest
from gpudiag.render.console import summary_table
from gpudiag.render.safe_text import clean_run, console as console_text
from gpudiag.jsonfile import cycle_collector_paused
from gpudiag.store import StoreError
from gpudiag.cli.report_stream import FINDINGS_AND_VERDICT, streamed_run
from gpudiag.cli.fail_on import fail_on_option
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT
from gpudiag.verdict import Verdict, explicit_checks, verdict


GPU_PROBE_TIMEOUTS = bundle.PROBE_TIMEOUTS  # declared beside each probe (probes/catalog.py)


def selected_probes(probes: str | None, deep: bool) -> list[str]:
    names = listed_names(probes, "--probes") or list(bundle.LIGHT_PROBES)
    if deep:
        names += [p for p in bundle.DEEP_PROBES if p not in names]
    unknown = [p for p in names if p not in bundle.ALL_PROBES]
    if unknown:
        raise UserError(f"--probes: unknown probe {', '.join(unknown)} (known: {', '.join(bundle.ALL_PROBES)})")
    # A probe that loads production servers runs only under its own command, never through scan.
    explicit = [p for p in names if p in bundle.EXPLICIT_PROBES]
    if explicit:
        raise UserError(f"--probes: {', '.join(explicit)} loads the live servers and runs only through gpudiag bench")
    return bundle.with_needs(names)


@click.command()
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@inventory_option
@click.option("--python", help="Interpreter to run the probes with on every target (e.g. the sglang venv).")
@click.option("--probes", help="Comma-separated probes (default: the light set).")
@click.option("--deep", is_flag=True, help="Add the GPU-touching probes (copy_bench, cuda_graph).")
@click.option("--force", is_flag=True, help="Let GPU probes run on GPUs that look busy.")
@click.option("--set", "settings", multiple=True, metavar="PROBE.KEY=VALUE", help="A probe option (repeatable).")
@click.option(
    "--forks", type=click.IntRange(1, 1024), default=DEFAULT_FORKS, show_default=True, help="Hosts scanned at once."
)
@click.option(
    "--timeout",
    type=Seconds(1),
    help=f"Deadline per host in seconds, connection included [default: {DEFAULT_TIMEOUT:.0f}, "
    f"plus each GPU probe's own limit when one is selected].",
)
@click.option("--probe-timeout", type=Seconds(1), help="Time limit per probe on the host.")
@click.option("--accept-new", is_flag=True, help="Record unknown host keys (like OpenSSH accept-new).")
@click.option("--known-hosts", type=click.Path(dir_okay=False), help="gpudiag's own known-hosts file.")
@click.option(
    "--connect-timeout",
    type=Seconds(0.1),
    help="Seconds to wait for an SSH connection and its handshake "
    "[default: the host's ssh config ConnectTimeout, else 10].",
)
@click.option(
    "--verify-all",
    is_flag=True,
    help="Hash every installed sglang file against its RECORD, not only the files facts cite.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
@click.option(
    "--max-output",
    type=click.IntRange(1, 4096),
    default=DEFAULT_OUTPUT_LIMIT // 2**20,
    show_default=True,
    metavar="MIB",
    help="Output a host may send, in MiB; past it the host is a frame_error and its connection closed.",
)
@fail_on_option
@reports_dir_option
def scan(
    targets: tuple[str, ...],
    inventory_path: str | None,
    python: str | None,
    probes: str | None,
    deep: bool,
    force: bool,
    settings: tuple[str, ...],
    forks: int,
    timeout: float | None,
    probe_timeout: float | None,
    accept_new: bool,
    known_hosts: str | None,
    connect_timeout: float | None,
    verify_all: bool,
    as_json: bool,
    max_output: int,
    fail_on: str,
    reports_dir: Path,
) -> int:
    """Run the probes on TARGETS (hosts, groups, user@host:port, localhost) and store the results."""
    names = selected_probes(probes, deep)
    options = _probe_options(settings, names, force, deep, verify_all)
    hosts = load_hosts(targets, inventory_path, python)
    warn_ignored_ssh_settings(hosts)
    request, planned = _request(names, options, probe_timeout, timeout, forks, max_output)
    console = Console(stderr=True)
    if planned:
        console.print(f"gpudiag: {planned}", markup=False, highlight=False)
    if any(h.transport == "ssh" for h in hosts):  # host keys concern ssh hosts only (paramiko stays unloaded)
        check_known_hosts_path(known_hosts, accept_new)
    hosts = skip_unsafe_command_lines(hosts, console)
    # What the user asked for by name is recorded: a requested check that cannot run makes the host incomplete.
    run = StoredRun(
        reports_dir,
        "scan",
        console,
        planned=[h.name for h in hosts],
        extra={"requested": {"checks": list(explicit_checks((), probes, deep))}},
    )
    run.fold = (fold := RunFold(run.writer.dir, run.writer.manifest, FINDINGS_AND_VERDICT)).add
    factory = transports(accept_new=accept_new, known_hosts=known_hosts, connect_timeout=connect_timeout)
    recorded = RecordedKeys(known_hosts, accept_new, hosts)
    outcome, manifest, stop = run_hosts(run, hosts, request, factory, console)
    recorded.report()
    with cycle_collector_paused():  # the stored run judged once for its findings: no cycles in it
        stored = _stored_run(run.writer.dir, console, folded=None if run.failures else (fold, manifest))
        findings = None if stored is None else rules.all_findings(stored)
        result = None if stored is None else verdict(stored, findings or [], fail_on)
    for line in given_lines([(h.name, h.probes) for h in stored.hosts] if stored is not None else []):
        console.print(f"gpudiag: {line}", markup=False, highlight=False)
    _print_results(outcome, manifest, run.writer.dir, findings, result, as_json)
    return _exit_code(outcome, run, stop, result, console)


def _probe_options(
    settings: tuple[str, ...], names: list[str], force: bool, deep: bool, verify_all: bool
) -> dict[str, Any]:
    """The probes' options: each --set checked against the probe it names, then the scan's own flags."""
    options = checked_settings(settings, names)
    options.update(force=force, deep=deep)
    if verify_all:
        options.setdefault("sglang_source", {})["verify_all"] = True
    return options


def _request(
    names: list[str],
    options: dict[str, Any],
    probe_timeout: float | None,
    timeout: float | None,
    forks: int,
    max_output: int,
) -> tuple[ScanRequest, str | None]:
    """What every host is asked, and how the host will share a --timeout (None: the declared limits fit). The
    host's runner hands its time out as the probes run (probes/timeshare.py); nothing is split here."""
    declared = {} if probe_timeout else {p: GPU_PROBE_TIMEOUTS[p] for p in names if p in GPU_PROBE_TIMEOUTS}
    planned = plan_line(declared, timeout)
    request = ScanRequest(
        probes=names,
        options=options,
        probe_timeout=probe_timeout,
        timeout=timeout or DEFAULT_TIMEOUT + sum(declared.values()),
        forks=forks,
        output_limit=max_output * 2**20,
    )
    return request, planned


def _exit_code(
    outcome: ScanOutcome, run: StoredRun, stop: StopSignals, result: Verdict | None, console: Console
) -> int:
    """One exit status: interrupted, internal error, failed writes, then the verdict of the stored run."""
    if outcome.interrupted:
        console.print(
            f"interrupted{' by ' + stop.signal_name if stop.signal_name else ''}: finished hosts are kept",
            style="yellow",
        )
        return ExitCode(stop.exit_code)
    if run.failures:
        console.print(
            f"gpudiag: error: {len(run.failures)} result write(s) failed; the stored run is incomplete "
            f"(gpudiag report says which)",
            markup=False,
            highlight=False,
        )
    if any(r.status == INTERNAL_ERROR for r in outcome.results):
        return ExitCode.INTERNAL
    if run.failures:
        return ExitCode.HOSTS_FAILED
    if result is None:  # the verdict needs the stored run; without it only the hosts' statuses are known
        return ExitCode.HOSTS_FAILED if any(r.status != OK for r in outcome.results) else ExitCode.INCOMPLETE
    return ExitCode(result.exit_code)


def _print_results(
    outcome: ScanOutcome,
    manifest: RunManifest,
    run_dir: Path,
    findings: list[Finding] | None,
    result: Verdict | None,
    as_json: bool,
) -> None:
    """The scan's results on stdout (progress and warnings went to stderr): run.json's document with the
    findings as JSON, or the summary table, each incomplete host and the findings' counts."""
    results = ResultConsole()
    if as_json:
        doc = manifest.to_dict()
        doc["findings"] = None if findings is None else [f.to_dict() for f in findings]
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    else:
        results.print(summary_table(outcome.results, f"gpudiag scan {manifest.run_id}"))
        results.print(f"results: {run_dir}", markup=False, highlight=False)
        for host in result.incomplete if result else ():
            results.print(
                f"{console_text(host.name)}: incomplete — {console_text('; '.join(host.reasons), 1200)}",
                markup=False,
                highlight=False,
                style="yellow",
                soft_wrap=True,
            )
        if findings:
            counts: dict[str, int] = {}
            for finding in findings:
                counts[finding.severity] = counts.get(finding.severity, 0) + 1
            summary = ", ".join(f"{n} {severity}" for severity, n in counts.items())
            results.print(f"findings: {summary} (gpudiag report --markdown -o FINDINGS.md)", markup=False)


def _stored_run(
    run_dir: Path, console: Console, also: Collection[str] = (), folded: tuple[RunFold, RunManifest] | None = None
) -> LoadedRun | None:
    """The run as `report` reads it, as folded when stored (`folded`), else read back (cli/report_stream.py)."""
    if folded is not None:
        return folded[0].run(folded[1])
    try:
        return clean_run(streamed_run(run_dir, derive=FINDINGS_AND_VERDICT | set(also))[0])
    except StoreError as exc:  # already warned when writing failed; findings need the stored run
        console.print(f"gpudiag: warning: findings not checked: {exc}", markup=False, highlight=False)
        return None


def skip_unsafe_command_lines(hosts: list[Host], console: Console) -> list[Host]:
    """Every ssh host's command line must read the same under every login shell: a host whose value would
    not (a quote or backslash in `python`) is not scanned, as any host with an inventory value gpudiag
    cannot honour: one warning line naming it and file:line, never contacted, the other hosts scanned."""
    from gpudiag.transports.container import exec_prefix
    from gpudiag.transports.shell import UnsafeWord, command_line

    checked = []
    for host in hosts:
        if host.transport == "ssh" and not host.skip_reason:
            try:
                command_line(
                    (exec_prefix(host.container) if host.container else []) + bundle.bootstrap_argv(host.python)
                )
            except UnsafeWord as exc:
                where = f"{host.source}: " if host.source else ""
                host = host.with_(skip_reason=f"{where}host {host.name!r}: python or container {exc}")
                console.print(
                    f"gpudiag: warning: {host.name}: not scanned: {host.skip_reason}",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        checked.append(host)
    return checked


def check_known_hosts_path(path: str | None, accept_new: bool) -> None:
    """--known-hosts must be a file gpudiag can read and, for --accept-new, create: a usage error before
    connecting, not one failure per host."""
    from gpudiag.transports.hostkeys import KnownHostsPathError, check_own_file

    try:
        check_own_file(path, accept_new)
    except KnownHostsPathError as exc:
        raise UserError(str(exc)) from None
