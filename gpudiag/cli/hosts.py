"""`gpudiag hosts`: what each target resolves to and how it is reached, without connecting."""
from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from gpudiag.cli.common import inventory_option, load_hosts


@click.command()
@click.argument("targets", nargs=-1)
@inventory_option
@click.option("--python", help="Interpreter override, as for scan.")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved hosts as JSON.")
def hosts(targets: tuple[str, ...], inventory_path: str | None, python: str | None, as_json: bool) -> None:
    """Show what TARGETS (default: every inventory host) resolve to."""
    resolved = load_hosts(targets or ("all",), inventory_path, python)
    if as_json:
        click.echo(json.dumps([h.to_dict() for h in resolved], indent=2))
        return
    table = Table(title="gpudiag hosts")
    for column in ("name", "route", "python", "groups", "defined at"):
        table.add_column(column, overflow="fold")
    for h in resolved:
        table.add_row(h.name, h.describe_route(), h.python, ",".join(h.groups), h.source)
    Console().print(table)


COMMANDS = (hosts,)
