"""`gpudiag diff RUN_A RUN_B`: what changed per host between two stored runs."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import ResultConsole, reports_dir_option
from gpudiag.run_records import LoadedRun
from gpudiag.render.safe_text import clean_run, console as safe
from gpudiag.rundiff import HostDiff, diff_runs
from gpudiag.store import StoreError
from gpudiag.run_loader import load_run, resolve_run_dir


def _load(spec: str, reports_dir: Path) -> LoadedRun:
    try:
        return clean_run(load_run(resolve_run_dir(spec, reports_dir)))  # host strings bounded, escapes gone
    except StoreError as exc:
        raise UserError(str(exc)) from None


@click.command()
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@click.option("--all", "show_all", is_flag=True, help="Also list hosts where nothing changed.")
@reports_dir_option
def diff(run_a: str, run_b: str, as_json: bool, show_all: bool, reports_dir: Path) -> int:
    """Show what changed per host between RUN_A and RUN_B (run ids or directories)."""
    a, b = _load(run_a, reports_dir), _load(run_b, reports_dir)
    changes = diff_runs(a, b)
    if as_json:
        click.echo(
            json.dumps(
                {"a": a.manifest.run_id, "b": b.manifest.run_id, "hosts": [d.to_dict() for d in changes]}, indent=2
            )
        )
        return ExitCode.OK
    console = ResultConsole(highlight=False)
    run_a, run_b = safe(a.manifest.run_id), safe(b.manifest.run_id)
    console.print(Text(f"gpudiag diff {run_a} → {run_b}"))
    shown = [d for d in changes if d.changed or show_all]
    for host in shown:
        _print_host(console, host, run_a, run_b)
    unchanged = len(changes) - len([d for d in changes if d.changed])
    if unchanged:
        console.print(Text(f"{unchanged} host(s) unchanged"), style="dim")
    return ExitCode.OK


def _print_host(console: Console, d: HostDiff, run_a: str, run_b: str) -> None:
    # Host-provided text goes through the console sanitiser and is printed as plain Text: a version or path
    # holding an escape sequence or "[...]" is neither a terminal command nor rich markup.
    def line(text: str, style: str = "") -> None:
        console.print(Text(safe(text, 2000), style=style))

    name = safe(d.name)
    if d.only_in:
        line(f"{name}: only in {run_a if d.only_in == 'a' else run_b}")
        return
    if not d.changed:
        line(f"{name}: unchanged")
        return
    line(name, "bold")
    for what, before, after in d.facts:
        line(f"  {what}: {safe(before)} → {safe(after)}")
    for kind, paths in d.files.items():
        line(f"  sglang files {kind}: {', '.join(safe(p) for p in paths)}")
    for flag, before, after in d.flags:
        line(f"  server flag {safe(flag)}: {safe(before)} → {safe(after)}")
    for title in d.new_findings:
        line(f"  new finding: {safe(title)}")
    for title in d.resolved_findings:
        line(f"  resolved: {safe(title)}")
    for t in d.timings:
        line(
            f"  copy timing GPU {safe(t['gpu'])} {safe(t['workload'])} {safe(t['strategy'])} ({t['mode']}): "
            f"{t['before_us']:g} µs → {t['after_us']:g} µs ({t['change']:+.0%}, noise ±{t['noise_us']:g} µs)"
        )
