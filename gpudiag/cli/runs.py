"""What every command that scans shares: a stored run that survives write errors, the transports, and one
way to run the hosts under the stop-signal policy.

A run that cannot be created is an input error (exit 2); a write that fails during the run is a warning,
so a full disk never costs the hosts still running, and the summary still lists every host.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from gpudiag.cli import UserError
from gpudiag.cli.ssh_settings import ssh_resolution
from gpudiag.cli.signals import StopSignals, interrupt_policy
from gpudiag.models import INTERRUPTED, Host, HostResult
from gpudiag.run_records import RunManifest
from gpudiag.orchestrator import Orchestrator, ScanOutcome, ScanRequest, summary_only
from gpudiag.render.console import ScanProgress
from gpudiag.store import RunWriter, StoreError
from gpudiag.transports import Transport, transport_for


class StoredRun:
    def __init__(
        self,
        reports_dir: Path,
        kind: str,
        console: Console,
        extra: dict[str, Any] | None = None,
        planned: list[str] | None = None,
    ):
        resolved = ssh_resolution(planned or [])
        if resolved:  # which resolver gave each ssh host its settings: `ssh -G` or gpudiag's own reader
            extra = dict(extra or {}, ssh_settings={"resolved_by": resolved})
        try:
            self.writer = RunWriter(reports_dir, kind, sys.argv, extra=extra, planned=planned)
        except StoreError as exc:
            raise UserError(f"--reports-dir: {exc}") from None
        self.console = console
        self.failures: list[str] = []  # every write that failed: the command must not exit 0
        # Handed each result's file and the text written there, with the host's name, once it is stored.
        self.fold: Callable[[Path, str, str], None] | None = None

    def warn(self, exc: StoreError) -> None:
        self.failures.append(str(exc))
        self.console.print(f"gpudiag: warning: {exc}", markup=False, highlight=False, soft_wrap=True)

    def store(self, result: HostResult) -> None:
        try:
            path, text = self.writer.write_host_text(result)
        except StoreError as exc:
            self.warn(exc)
            return
        if self.fold is not None:
            self.fold(path, text, result.name)

    def finish(
        self, outcome: ScanOutcome, extra: dict[str, Any] | None = None, signal: str | None = None
    ) -> RunManifest:
        """List every host in run.json and close the run; a failed write is a warning, the summary stays."""
        for result in outcome.results:
            try:
                self.writer.note_host(result.name, result.status, result.reason)
            except StoreError as exc:
                self.warn(exc)
                break  # the same error for every host: once is enough
        try:
            return self.writer.finish(interrupted=outcome.interrupted, extra=extra, signal=signal)
        except StoreError as exc:
            self.warn(exc)
            return self.writer.manifest


def transports(**ssh_options: Any) -> Callable[[Host], Transport]:
    """The transport factory for a scan: ssh options reach only ssh hosts (transport_for sees to that)."""
    return functools.partial(transport_for, **ssh_options)


def run_hosts(
    run: StoredRun,
    hosts: list[Host],
    request: ScanRequest,
    factory: Callable[[Host], Transport],
    console: Console,
    summarize: Callable[[ScanOutcome], dict[str, Any]] | None = None,
) -> tuple[ScanOutcome, RunManifest, StopSignals]:
    """Run every host with progress on `console`, storing each result as it comes; SIGINT, SIGTERM and SIGHUP
    stop the run and keep what finished. `summarize` adds the command's own block to run.json."""
    with interrupt_policy() as stop:
        try:
            with ScanProgress(len(hosts), console=console) as progress:

                def on_result(result: HostResult) -> None:
                    run.store(result)
                    progress.host_done(result)

                outcome = Orchestrator(
                    request,
                    factory,
                    on_start=progress.host_started,
                    on_result=on_result,
                    on_event=progress.host_event,
                    retain=None if summarize else summary_only,  # stored: only a summarize needs the data
                ).run(hosts)
        except KeyboardInterrupt:  # a signal outside the orchestrator's own wait: hosts stored so far stay
            outcome = ScanOutcome(
                [
                    HostResult(
                        name=h.name, status=INTERRUPTED, reason="the run was interrupted before this host finished"
                    )
                    for h in hosts
                ],
                interrupted=True,
            )
        stop.finishing()  # only writing is left: a late signal must not cut run.json short
        manifest = run.finish(outcome, extra=summarize(outcome) if summarize else None, signal=stop.signal_name)
    return outcome, manifest, stop
