"""`gpudiag repro cuda-graph-crash`: reproduce CUDA-graph failures on the EAGLE / DFlash paths, or
classify a crash log someone already has (`--log FILE`, `--log -` for stdin; no host contact).

Exit codes: 0 nothing failed; 1 a failing cell; 2 bad input; 3 a host, or some cells, could not run the
repro (unreachable, bad config); 4 nothing ran (every cell skipped: no CUDA).
With --log: 0 clean (no crash in the log); 1 a crash (a known signature or an unclassified crash);
2 the log cannot be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import RecordedKeys, ResultConsole, Seconds, inventory_option, load_hosts, reports_dir_option
from gpudiag.cli.common import complete_targets
from gpudiag.cli.fail_on import fail_on_option
from gpudiag.cli.runs import StoredRun, run_hosts, transports
from gpudiag.models import Host
from gpudiag.orchestrator import Orchestrator, ScanOutcome, ScanRequest, TransportFactory
from gpudiag.render.safe_text import console as safe
from gpudiag.render import crash_log
from gpudiag.repro import logrun
from gpudiag.repro import plan as plan_mod
from gpudiag.repro import plan_view
from gpudiag.render.repro_host import print_host as _print_host
from gpudiag.repro import summary
from gpudiag.store import RunWriter, StoreError

REPRO_PROBES = ["env", "deployment", "sglang_source", "cuda_graph"]
DEFAULT_HOST_TIMEOUT = 3600.0
OUTCOME_EXIT = {
    "ok": ExitCode.OK,
    "failures": ExitCode.FINDINGS,
    "nothing_ran": ExitCode.INCOMPLETE,
    "hosts_failed": ExitCode.HOSTS_FAILED,
    "cells_failed_to_run": ExitCode.HOSTS_FAILED,
}


@click.group()
def repro() -> None:
    """Reproduce known failures on a host, in isolated children, and store what happened."""


@repro.command("cuda-graph-crash")
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@inventory_option
@click.option("--python", help="Interpreter on the host (default: the one serving sglang, else python3).")
@click.option("--algorithm", default="all", show_default=True, help="EAGLE, EAGLE3, DFLASH or all (comma list).")
@click.option(
    "--model", help="Model dir or hub id (the host's HF cache) whose config.json is cut (default: the live server's)."
)
@click.option("--draft-model", help="Draft model dir or hub id on the host (default: the live server's, or derived).")
@click.option("--layers", type=click.IntRange(1, 256), default=2, show_default=True, help="Decoder layers kept.")
@click.option("--batch-sizes", help="Batch sizes to sweep [default: 1,4,16,64 up to the live server's largest].")
@click.option(
    "--draft-tokens",
    help="Draft tokens: N (one launch, no bisection) or LOW-HIGH [default: 2 to the server's, or 2-16].",
)
@click.option("--tp", type=click.IntRange(1, 64), help="Tensor parallel size [default: the live server's, or 1].")
@click.option("--topk", type=click.IntRange(1, 16), default=1, show_default=True, help="EAGLE top-k.")
@click.option(
    "--mode",
    type=click.Choice(plan_mod.MODES),
    default="auto",
    show_default=True,
    help="sglang (launch it with dummy weights), synthetic (torch alone), both, or auto.",
)
@click.option("--force", is_flag=True, help="Use GPUs that look busy (never those of a live sglang server).")
@click.option(
    "--model-override",
    metavar="JSON",
    help="Passed as --json-model-override-args (the layer cut is already in the generated config.json).",
)
@click.option(
    "--judge-acceptance",
    is_flag=True,
    help="Call an acceptance length of 1.00 a silent failure (off: dummy weights may accept nothing).",
)
@click.option(
    "--cell-timeout",
    type=Seconds(5),
    default=120.0,
    show_default=True,
    help="Seconds per synthetic cell before its child is killed.",
)
@click.option(
    "--max-mem-mib",
    type=click.IntRange(64, 1 << 30),
    default=plan_mod.DEFAULT_MAX_MEM_MIB,
    show_default=True,
    help="GPU memory cap of each synthetic child (torch's allocator); larger cells are skipped.",
)
@click.option(
    "--timeout", type=Seconds(10), default=DEFAULT_HOST_TIMEOUT, show_default=True, help="Deadline per host in seconds."
)
@click.option(
    "--log",
    "log_file",
    metavar="FILE|-",
    help="Classify this server log (its last 8 MiB, read for at most 20 s: GPUDIAG_LOG_READ_SECONDS; - reads "
    "stdin) instead of running anything: "
    "exit 0 clean, 1 a crash, 2 unreadable.",
)
@click.option("--accept-new", is_flag=True, help="Record unknown host keys (like OpenSSH accept-new).")
@click.option("--known-hosts", type=click.Path(dir_okay=False), help="gpudiag's own known-hosts file.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.option("--plan", "plan_only", is_flag=True, help="Print every launch it would make; start nothing, no GPU.")
@fail_on_option
@reports_dir_option
def cuda_graph_crash(
    targets: tuple[str, ...],
    inventory_path: str | None,
    python: str | None,
    algorithm: str,
    model: str | None,
    draft_model: str | None,
    layers: int,
    batch_sizes: str | None,
    draft_tokens: str | None,
    tp: int | None,
    topk: int,
    mode: str,
    force: bool,
    model_override: str | None,
    judge_acceptance: bool,
    cell_timeout: float,
    max_mem_mib: int,
    timeout: float,
    log_file: str | None,
    accept_new: bool,
    known_hosts: str | None,
    as_json: bool,
    plan_only: bool,
    fail_on: str,
    reports_dir: Path,
) -> int:
    """Reproduce CUDA-graph crashes on TARGETS (default localhost) or classify --log FILE."""
    if log_file is not None:
        if targets:
            raise UserError("--log classifies a file on this machine; give it without TARGETS")
        return _classify_log(log_file, as_json, reports_dir, fail_on)
    try:
        plan = plan_mod.from_options(
            algorithm,
            batch_sizes,
            draft_tokens,
            model_override,
            layers=layers,
            tp=tp,
            topk=topk,
            mode=mode,
            model=model,
            draft_model=draft_model,
            force=force,
            cell_timeout=cell_timeout,
            plan_only=plan_only,
            judge_acceptance=judge_acceptance,
            max_mem_mib=max_mem_mib,
        )
    except plan_mod.PlanError as exc:
        raise UserError(str(exc)) from None
    hosts = load_hosts(targets or ("localhost",), inventory_path, python)
    request = _request(plan, timeout)
    factory = transports(accept_new=accept_new, known_hosts=known_hosts)
    with RecordedKeys(known_hosts, accept_new, hosts):  # said at the end: a plan connects and records keys too
        if plan_only:  # nothing is stored: a plan is no run
            return _print_plans(Orchestrator(request, factory).run(hosts), as_json)
        return _run_repro(plan, hosts, request, factory, reports_dir, as_json, fail_on)


def _request(plan: plan_mod.ReproPlan, timeout: float) -> ScanRequest:
    """The repro's probes under the host's deadline; each probe may take all but 30 s of it (at least 60 s)."""
    return ScanRequest(
        probes=list(REPRO_PROBES),
        options=plan.request_options(),
        timeout=timeout,
        probe_timeout=max(60.0, timeout - 30.0),
    )


def _run_repro(
    plan: plan_mod.ReproPlan,
    hosts: list[Host],
    request: ScanRequest,
    factory: TransportFactory,
    reports_dir: Path,
    as_json: bool,
    fail_on: str,
) -> int:
    """Runs the repro on every host, stores it as a run of kind "repro", prints each host's cells, and
    returns the stored run's verdict (or the signal's code when the run was stopped)."""
    console = Console(stderr=True)
    run = StoredRun(
        reports_dir,
        "repro",
        console,
        planned=[h.name for h in hosts],
        extra={"repro": {"problem": "cuda-graph-crash", "plan": plan.to_dict()}},
    )

    def summarize(outcome: ScanOutcome) -> dict[str, Any]:
        return {"repro": summary.run_summary([summary.host_repro(r) for r in outcome.results], plan.to_dict())}

    outcome, manifest, stop = run_hosts(run, hosts, request, factory, console, summarize)
    repros = [summary.host_repro(r) for r in outcome.results]
    block = summarize(outcome)["repro"]
    writer = run.writer
    if as_json:
        click.echo(json.dumps(block, indent=2, sort_keys=True))
    else:
        results = ResultConsole()  # results to stdout; progress and warnings stay on stderr
        for item in repros:
            _print_host(results, item)
        results.print(Text(f"results: {writer.dir}  (gpudiag report {manifest.run_id})"))
    if outcome.interrupted:
        console.print(
            f"interrupted{' by ' + stop.signal_name if stop.signal_name else ''}: finished hosts are kept; "
            "every server and child was killed",
            style="yellow",
        )
        return ExitCode(stop.exit_code)
    return ExitCode(_final_exit(writer.dir, block["outcome"], fail_on, console))


def _final_exit(run_dir: Path, outcome: str, fail_on: str, console: Console) -> int:
    """The stored repro's verdict (cells that failed are findings; every cell skipped is incomplete), as
    `gpudiag report` computes it; the outcome's own code when the run cannot be read back."""
    from gpudiag.findings import all_findings
    from gpudiag.render.safe_text import clean_run
    from gpudiag.store import StoreError
    from gpudiag.run_loader import load_run
    from gpudiag.verdict import verdict

    try:
        run = clean_run(load_run(run_dir))
    except StoreError as exc:
        console.print(Text(f"gpudiag: warning: verdict from the outcome only: {exc}"))
        return int(OUTCOME_EXIT[outcome])
    # The repro's verdict is about its cells: facts the light probes gathered on the way are `scan`'s business.
    findings = [f for f in all_findings(run) if f.id.startswith("cuda_graph.repro")]
    result = verdict(run, findings, fail_on, requested=("cuda_graph",))
    if outcome == "cells_failed_to_run" and result.exit_code in (ExitCode.OK, ExitCode.INCOMPLETE):
        return int(ExitCode.HOSTS_FAILED)  # the harness itself failed on some cell: not a clean verdict
    return int(result.exit_code)


def _print_plans(outcome: ScanOutcome, as_json: bool) -> int:
    plans = [plan_view.host_plan(r) for r in outcome.results]
    if as_json:
        click.echo(plan_view.as_json(plans))
    else:
        for plan in plans:
            for line in plan_view.text_lines(plan):
                click.echo(safe(line, 20000))
    return int(ExitCode.HOSTS_FAILED if any(p.get("error") for p in plans) else ExitCode.OK)


def _classify_log(source: str, as_json: bool, reports_dir: Path, fail_on: str) -> int:
    """Classify a log, store it as a run of kind "log" (reports/latest keeps pointing at the last host run)."""
    try:
        block = logrun.classify_source(source)
    except logrun.LogUnreadable as exc:
        raise UserError(str(exc)) from None
    try:
        writer = RunWriter(reports_dir, logrun.RUN_KIND, sys.argv, extra={"log": block}, mark_latest=False)
        manifest = writer.finish(extra={"log": block})
    except StoreError as exc:
        raise UserError(f"--reports-dir: {exc}") from None
    if as_json:
        click.echo(json.dumps(dict(block, run_id=manifest.run_id), indent=2, sort_keys=True))
    else:
        for line in crash_log.describe(block):
            click.echo(safe(line, 2000))  # quoted log lines are host output: no escapes reach the terminal
        click.echo(f"results: {writer.dir}  (gpudiag report {manifest.run_id})")
    return ExitCode.FINDINGS if _log_fails(block, fail_on) else ExitCode.OK


def _log_fails(block: dict[str, Any], fail_on: str) -> bool:
    """Whether the log's crashes reach --fail-on: the findings `gpudiag report` gives this run, judged by the
    one threshold (a clean log never fails; `incomplete`: a log never fails)."""
    from gpudiag.findings import RUN_RULES
    from gpudiag.verdict import failing

    if not logrun.is_crash(block):
        return False
    return bool(failing([f for rule in RUN_RULES for f in rule({"log": block})], fail_on))
