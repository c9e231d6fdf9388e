"""Console output for scans: progress while hosts finish, a summary table at the end.

Rich progress on a terminal, with a line per running host showing its current step (probe, GPU, repro
cell); one plain line per host and per progress event otherwise (CI logs, pipes, TERM=dumb). NO_COLOR is
honoured by rich itself.
"""

from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from gpudiag.models import OK, Host, HostResult
from gpudiag.render.answers_block import host_list
from gpudiag.render.safe_text import console as safe
from gpudiag.transports.events import HostEvent

STATUS_STYLE = {OK: "green", "timeout": "yellow", "interrupted": "yellow", "probe_error": "yellow"}
MAX_HOST_ROWS = 12  # running hosts shown with their current step; more would push the bar off screen


def describe_event(event: HostEvent) -> str:
    """One line for a host's progress event, every host string made safe for the terminal."""
    probe, what = safe(event.probe, 60), safe(event.what, 80)
    count = (
        f" {event.i}/{event.n}"
        if event.i is not None and event.n is not None
        else (f" {event.i}" if event.i is not None else "")
    )
    if event.step == "probe":
        text = f"probe{count} {probe} {event.state}{f' ({what})' if what else ''}"  # what: the time it was given
    else:
        text = f"{probe}: {event.step}{count}{' ' + what if what else ''} {event.state}"
    if event.state == "finished" and event.status:
        text += f": {safe(event.status, 40)}"
    if event.duration_s is not None:
        text += f" ({event.duration_s:.1f} s)"
    return text


class ScanProgress:
    """Progress for one scan; thread-safe enough for the orchestrator's callbacks (rich locks itself)."""

    def __init__(self, total: int, console: Console | None = None, quiet: bool = False):
        self.console = console or Console(stderr=True)
        self.total = total
        self.done = 0
        self.failed = 0
        self.quiet = quiet
        # A dumb terminal cannot redraw: it gets the plain lines a pipe gets.
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal and not quiet
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._host_rows: dict[str, TaskID] = {}

    def __enter__(self) -> "ScanProgress":
        if self.live:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("[bold]scan", total=self.total, note=self._count_note())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)

    def _count_note(self) -> str:
        return f"{self.done}/{self.total} · {self.failed} failed"

    def host_started(self, host: Host) -> None:
        if self._progress is not None and len(self._host_rows) < MAX_HOST_ROWS:
            # Host names come from inventories and hosts: escaped, never read as rich markup.
            self._host_rows[host.name] = self._progress.add_task(
                f"  {escape(safe(host.name, 40))}", total=None, note="connecting"
            )

    def host_event(self, host: Host, event: HostEvent) -> None:
        """A step on a host began or ended: the host's row shows it, or one plain line says it."""
        text = describe_event(event)
        if self._progress is not None:
            row = self._host_rows.get(host.name)
            if row is not None:
                self._progress.update(row, note=escape(text))
        elif not self.quiet:
            self.console.print(f"{safe(host.name, 80)}: {text}", markup=False, highlight=False, soft_wrap=True)

    def host_done(self, result: HostResult) -> None:
        self.done += 1
        if result.status != OK:
            self.failed += 1
        if self._progress is not None and self._task is not None:
            row = self._host_rows.pop(result.name, None)
            if row is not None:
                self._progress.remove_task(row)
            self._progress.update(self._task, advance=1, note=self._count_note())
            if result.status != OK:  # failures scroll above the bar as they happen
                self._progress.console.print(
                    f"{safe(result.name)}: {safe(result.status)} — {safe(result.reason)}",
                    markup=False,
                    highlight=False,
                    style=STATUS_STYLE.get(result.status, "red"),
                )
        elif not self.quiet:
            reason = f" — {safe(result.reason)}" if result.reason else ""
            # One plain line per host (CI logs, pipes): no markup, no wrapping, so grep sees whole lines.
            self.console.print(
                f"[{self.done}/{self.total}] {safe(result.name)}: {safe(result.status)} "
                f"({result.duration_s:.1f} s){reason}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def summary_table(results: Sequence[HostResult], title: str) -> Table:
    """One row per host, except that hosts agreeing in status, probes and reason (their own name aside) are
    one row with their count, names and time range: 10,000 healthy hosts print one row."""
    table = Table(title=title, show_lines=False)
    for column in ("host", "status", "time", "probes", "reason"):
        table.add_column(column, overflow="fold")
    for (status, probes, reason), group in summary_rows(results).items():
        names = [r.name for r in group]
        times = [r.duration_s for r in group]
        when = f"{times[0]:.1f}s" if len(group) == 1 else f"{min(times):.1f}-{max(times):.1f}s"
        # Names, probe names and reasons come from hosts: cleaned (no escapes, capped) plain Text, never markup.
        table.add_row(
            Text(safe(names[0] if len(names) == 1 else host_list(names), 2000)),
            Text(safe(status), style=STATUS_STYLE.get(status, "red")),
            when,
            Text(safe(probes, 2000)),
            Text(safe(group[0].reason or "" if len(group) == 1 else reason)),
        )
    return table


def summary_rows(results: Sequence[HostResult]) -> dict[tuple[str, str, str], list[HostResult]]:
    """{(status, probes, reason with the host's name as HOST): hosts}, in first-seen order."""
    rows: dict[tuple[str, str, str], list[HostResult]] = {}
    for r in results:
        probes = ", ".join(f"{k}:{v.status}" for k, v in r.probes.items()) or "-"
        reason = (r.reason or "").replace(r.name, "HOST") if r.name else (r.reason or "")
        rows.setdefault((r.status, probes, reason), []).append(r)
    return rows
