"""`gpudiag runs`: the stored runs, newest first: id, kind, hosts, status counts, start time."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from gpudiag.cli import ExitCode
from gpudiag.cli.common import reports_dir_option
from gpudiag.cli.table_console import table_console
from gpudiag.jsonfile import read_json
from gpudiag.schema import SchemaError
from gpudiag.run_records import RunManifest
from gpudiag.render.safe_text import console as console_text
from gpudiag.run_journal import merged_hosts, read_journal


class _Unreadable(Exception):
    pass


def run_rows(reports_dir: Path) -> list[dict[str, Any]]:
    """One row per run directory; an unreadable run.json is a row that says so, never an abort."""
    rows = []
    for run_json in sorted((reports_dir / "runs").glob("*/run.json")):
        try:
            manifest = RunManifest.from_dict(read_json(run_json, _Unreadable), str(run_json))
            # A run killed before it compacted its journal lists the hosts it recorded there.
            journal = read_journal(run_json.parent)
            if journal:
                manifest = dataclasses.replace(manifest, hosts=merged_hosts(manifest.hosts, journal))
        except (_Unreadable, SchemaError, TypeError, ValueError, AttributeError) as exc:
            rows.append(
                {
                    "run_id": run_json.parent.name,
                    "kind": "?",
                    "hosts": 0,
                    "statuses": {},
                    "started_at": "",
                    "state": f"unreadable: {str(exc).splitlines()[0] if str(exc) else exc}",
                }
            )
            continue
        statuses = Counter(str(h.get("status") or "pending") for h in manifest.hosts)
        state = "interrupted" if manifest.interrupted else "finished" if manifest.finished_at else "unfinished"
        rows.append(
            {
                "run_id": manifest.run_id,
                "kind": manifest.kind,
                "hosts": len(manifest.hosts),
                "statuses": dict(sorted(statuses.items())),
                "started_at": manifest.started_at,
                "state": state,
            }
        )
    rows.sort(key=lambda r: (r["started_at"], r["run_id"]), reverse=True)
    return rows


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@click.option("-n", "--last", type=click.IntRange(1, None), help="Only the newest N runs.")
@reports_dir_option
def runs(as_json: bool, last: int | None, reports_dir: Path) -> int:
    """List the stored runs, newest first (id, kind, hosts, status counts, start time)."""
    rows = run_rows(reports_dir)[:last] if last else run_rows(reports_dir)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return ExitCode.OK
    if not rows:
        click.echo(f"no runs under {reports_dir / 'runs'}", err=True)
        return ExitCode.OK
    table = Table(title=f"runs in {reports_dir}")
    for column in ("run", "kind", "hosts", "statuses", "started", "state"):
        table.add_column(column, overflow="fold", no_wrap=column in ("run", "started"))
    for r in rows:
        statuses = ", ".join(f"{n} {s}" for s, n in r["statuses"].items())
        # run.json can hold anything a host or an edit put there: cleaned, plain Text.
        table.add_row(
            *(
                Text(console_text(v))
                for v in (r["run_id"], r["kind"], r["hosts"], statuses, r["started_at"], r["state"])
            )
        )
    table_console().print(table)
    return ExitCode.OK
