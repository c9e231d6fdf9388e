"""Options and helpers shared by the commands."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from gpudiag.cli import UserError
from gpudiag.inventory import InventoryError, load_inventory, resolve_targets
from gpudiag.models import Host
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError

DEFAULT_INVENTORY = "inventory.yaml"
# Longest time limit any option takes: a week is already far beyond any scan; 1e309 (inf) or nan is a typo.
MAX_SECONDS = 7 * 24 * 3600.0


class Seconds(click.ParamType):
    """A finite number of seconds within [minimum, MAX_SECONDS]; anything else is a one-line usage error."""
    name = "seconds"

    def __init__(self, minimum: float) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not self.minimum <= seconds <= MAX_SECONDS:   # also false for nan
            self.fail(f"{value} is not between {self.minimum:g} and {MAX_SECONDS:.0f} seconds", param, ctx)
        return seconds


class ResultConsole(Console):
    """A rich console on stdout, for results. rich ends a broken pipe with exit 1 ("findings"); here it is
    a BrokenPipeError, which the CLI turns into the conventional quiet exit 141."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def reports_dir_option(f: Any) -> Any:
    return click.option("--reports-dir", type=click.Path(file_okay=False, path_type=Path),
                        default=lambda: os.environ.get("GPUDIAG_REPORTS", "reports"), show_default="reports",
                        help="Where runs are stored (env GPUDIAG_REPORTS).")(f)


def inventory_option(f: Any) -> Any:
    return click.option("-i", "--inventory", "inventory_path", type=click.Path(dir_okay=False),
                        help="Inventory file (gpudiag or Ansible YAML form).")(f)


def load_hosts(targets: tuple[str, ...], inventory_path: str | None, python: str | None) -> list[Host]:
    """Resolve targets; an explicit or default inventory file is used when present."""
    try:
        inventory = None
        path = inventory_path or (DEFAULT_INVENTORY if Path(DEFAULT_INVENTORY).is_file() else None)
        if path:
            inventory = load_inventory(path)
        if not targets:
            raise UserError("no targets given (try `localhost`, a host, a group, or `all` with -i)")
        return resolve_targets(list(targets), inventory, python)
    except InventoryError as exc:
        raise UserError(str(exc)) from None


def warn_ignored_ssh_settings(hosts: list[Host]) -> None:
    """One stderr line per ssh host whose ssh config holds settings gpudiag does not honour."""
    for line in ignored_ssh_settings(hosts):
        click.echo(f"gpudiag: warning: {line}", err=True)


def ignored_ssh_settings(hosts: list[Host]) -> list[str]:
    ssh_hosts = [h for h in hosts if h.transport == "ssh"]
    if not ssh_hosts:
        return []
    try:
        config = SshConfig()
    except SshConfigError:
        return []   # an unreadable config already stopped resolution with its own error
    lines = []
    for host in ssh_hosts:
        # The alias the user wrote is the host's name or its address before HostName mapped it.
        notes = dict.fromkeys(config.ignored(host.name) + config.ignored(host.address))
        if notes:
            lines.append(f"{host.name}: {config.path}: {'; '.join(notes)}")
    return lines


def checked_settings(settings: tuple[str, ...], selected: list[str]) -> dict[str, Any]:
    """`--set` items checked against the probes' declared options before anything connects."""
    from probes.probe_info import SettingError, check_settings

    try:
        checked: dict[str, Any] = check_settings(parse_settings(settings), selected)
    except SettingError as exc:
        raise UserError(str(exc)) from None
    return checked


def parse_settings(settings: tuple[str, ...]) -> dict[str, Any]:
    """`--set PROBE.KEY=VALUE` → {"PROBE": {"KEY": VALUE}}; values are JSON when they parse as JSON."""
    options: dict[str, Any] = {}
    for item in settings:
        key, sep, raw = item.partition("=")
        probe, dot, name = key.partition(".")
        if not sep or not dot or not probe or not name:
            raise UserError(f"--set {item!r}: expected PROBE.KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        options.setdefault(probe, {})[name] = value
    return options
