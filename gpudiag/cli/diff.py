"""`gpudiag diff RUN_A RUN_B`: what changed per host between two stored runs."""
from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import ResultConsole, reports_dir_option
from gpudiag.models import LoadedRun
from gpudiag.rundiff import HostDiff, diff_runs
from gpudiag.store import StoreError, load_run, resolve_run_dir


def _load(spec: str, reports_dir: Path) -> LoadedRun:
    try:
        return load_run(resolve_run_dir(spec, reports_dir))
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
        click.echo(json.dumps({"a": a.manifest.run_id, "b": b.manifest.run_id,
                               "hosts": [d.to_dict() for d in changes]}, indent=2))
        return ExitCode.OK
    console = ResultConsole(highlight=False)
    console.print(Text(f"gpudiag diff {a.manifest.run_id} → {b.manifest.run_id}"))
    shown = [d for d in changes if d.changed or show_all]
    for host in shown:
        _print_host(console, host, a.manifest.run_id, b.manifest.run_id)
    unchanged = len(changes) - len([d for d in changes if d.changed])
    if unchanged:
        console.print(Text(f"{unchanged} host(s) unchanged"), style="dim")
    return ExitCode.OK


def _print_host(console: Console, d: HostDiff, run_a: str, run_b: str) -> None:
    # Host-provided text is printed as plain Text: a version or path holding "[...]" is not rich markup.
    if d.only_in:
        console.print(Text(f"{d.name}: only in {run_a if d.only_in == 'a' else run_b}"))
        return
    if not d.changed:
        console.print(Text(f"{d.name}: unchanged"))
        return
    console.print(Text(d.name, style="bold"))
    for what, before, after in d.facts:
        console.print(Text(f"  {what}: {before} → {after}"))
    for kind, paths in d.files.items():
        console.print(Text(f"  sglang files {kind}: {', '.join(paths)}"))
    for flag, before, after in d.flags:
        console.print(Text(f"  server flag {flag}: {before} → {after}"))
    for title in d.new_findings:
        console.print(Text(f"  new finding: {title}"))
    for title in d.resolved_findings:
        console.print(Text(f"  resolved: {title}"))
    for t in d.timings:
        console.print(Text(f"  copy timing GPU {t['gpu']} {t['workload']} {t['strategy']} ({t['mode']}): "
                           f"{t['before_us']:g} µs → {t['after_us']:g} µs ({t['change']:+.0%}, "
                           f"noise ±{t['noise_us']:g} µs)"))
