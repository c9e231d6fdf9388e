"""Console output for scans: progress while hosts finish, a summary table at the end.

Rich progress on a terminal, one plain line per host otherwise (CI logs, pipes). NO_COLOR is honoured
by rich itself.
"""
from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from gpudiag.models import OK, Host, HostResult
from gpudiag.render.safe_text import console as safe

STATUS_STYLE = {OK: "green", "timeout": "yellow", "interrupted": "yellow", "probe_error": "yellow"}


class ScanProgress:
    """Progress for one scan; thread-safe enough for the orchestrator's callbacks (rich locks itself)."""

    def __init__(self, total: int, console: Console | None = None, quiet: bool = False):
        self.console = console or Console(stderr=True)
        self.total = total
        self.done = 0
        self.failed = 0
        self.quiet = quiet
        self.live = self.console.is_terminal and not quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> "ScanProgress":
        if self.live:
            self._progress = Progress(TextColumn("[bold]scan"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                                      console=self.console, transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task("scan", total=self.total, failed=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)

    def host_started(self, host: Host) -> None:
        pass

    def host_done(self, result: HostResult) -> None:
        self.done += 1
        if result.status != OK:
            self.failed += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, failed=self.failed)
            if result.status != OK:   # failures scroll above the bar as they happen
                self._progress.console.print(f"{safe(result.name)}: {safe(result.status)} — {safe(result.reason)}",
                                             markup=False,
                                             highlight=False, style=STATUS_STYLE.get(result.status, "red"))
        elif not self.quiet:
            reason = f" — {safe(result.reason)}" if result.reason else ""
            # One plain line per host (CI logs, pipes): no markup, no wrapping, so grep sees whole lines.
            self.console.print(f"[{self.done}/{self.total}] {safe(result.name)}: {safe(result.status)} "
                               f"({result.duration_s:.1f} s){reason}", markup=False, highlight=False,
                               soft_wrap=True)


def summary_table(results: Sequence[HostResult], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("host", "status", "time", "probes", "reason"):
        table.add_column(column, overflow="fold")
    for r in results:
        probes = ", ".join(f"{k}:{v.status}" for k, v in r.probes.items()) or "-"
        style = STATUS_STYLE.get(r.status, "red")
        # Names, probe names and reasons come from hosts: cleaned (no escapes, capped) plain Text, never markup.
        table.add_row(Text(safe(r.name)), Text(safe(r.status), style=style), f"{r.duration_s:.1f}s",
                      Text(safe(probes, 2000)), Text(safe(r.reason or "")))
    return table
