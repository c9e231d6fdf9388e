"""Options and helpers shared by the commands."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from gpudiag.cli import UserError
from gpudiag.inventory import Inventory, InventoryError, load_inventory, resolve_targets
from gpudiag.inventory.ansible_sources import default_sources
from gpudiag.inventory.patterns import PatternError
from gpudiag.models import Host
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError
from gpudiag.cli.ssh_settings import command_ssh_config, remember_resolution

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
        if not self.minimum <= seconds <= MAX_SECONDS:  # also false for nan
            self.fail(f"{value} is not between {self.minimum:g} and {MAX_SECONDS:.0f} seconds", param, ctx)
        return seconds


class ResultConsole(Console):
    """A rich console on stdout, for results. rich ends a broken pipe with exit 1 ("findings"); here it is
    a BrokenPipeError, which the CLI turns into the conventional quiet exit 141."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def reports_dir_option(f: Any) -> Any:
    return click.option(
        "--reports-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: os.environ.get("GPUDIAG_REPORTS", "reports"),
        show_default="reports",
        help="Where runs are stored (env GPUDIAG_REPORTS).",
    )(f)


LIMIT_KEY = "gpudiag.limit"


def inventory_option(f: Any) -> Any:
    """`-i FILE` and `--limit PATTERN`; the limit rides on the click context, read by load_hosts."""
    f = click.option(
        "--limit",
        metavar="PATTERN",
        shell_complete=complete_targets,
        expose_value=False,
        callback=_remember_limit,
        help="Keep only the hosts this pattern also selects, as Ansible's --limit "
        "(a:b, a:!b, a:&b, wildcards, ranges, @FILE of names).",
    )(f)
    return click.option(
        "-i",
        "--inventory",
        "inventory_path",
        type=click.Path(),
        help="Inventory: gpudiag's YAML form, or an Ansible inventory (YAML, INI, or a directory of them; "
        "group_vars/ and host_vars/ beside it apply). Default: ./inventory.yaml, else Ansible's own "
        "(ANSIBLE_INVENTORY, or `inventory` in ansible.cfg).",
    )(f)


def complete_targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of TARGETS and --limit: the groups and hosts of the inventory the command would
    read (-i, else the default), for the last term of a pattern (`gpus:!gp` completes `gp`). Nothing is
    resolved and nothing connects: ssh config (and its `Match exec`) is not applied."""
    from click.shell_completion import CompletionItem

    cut = max(incomplete.rfind(sep) for sep in ",:") + 1
    head, word = incomplete[:cut], incomplete[cut:]
    if word[:1] in ("!", "&"):
        head, word = head + word[0], word[1:]
    written = ctx.params.get("inventory_path")
    source = (written, written) if written else _default_inventory()
    if source is None:
        return []
    try:
        inventory = load_inventory(source[0], SshConfig(Path(os.devnull)))
    except (InventoryError, SshConfigError, OSError, ValueError):
        return []  # completion never prints an error into the user's shell
    groups = [g for g in inventory.groups if g.startswith(word)]
    hosts = [h for h in inventory.hosts if h.startswith(word) and h not in groups]
    return [CompletionItem(head + g, help="group") for g in groups] + [
        CompletionItem(head + h, help="host") for h in hosts
    ]


def _remember_limit(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    ctx.meta[LIMIT_KEY] = value
    return value


def load_hosts(targets: tuple[str, ...], inventory_path: str | None, python: str | None) -> list[Host]:
    """Resolve targets (and --limit); `-i PATH`, else ./inventory.yaml when present, else the inventory
    Ansible would use (ANSIBLE_INVENTORY, ansible.cfg), is the inventory.

    A broken default inventory that -i did not name is only a warning: ad-hoc targets need no inventory.
    """
    if python is not None and not python.strip():
        raise UserError("--python is empty: give the interpreter (a path or a name on PATH), or leave the option out")
    ctx = click.get_current_context(silent=True)
    limit = ctx.meta.get(LIMIT_KEY) if ctx is not None else None
    unused, inventory, ssh, label = "", None, command_ssh_config(), DEFAULT_INVENTORY
    try:
        inventory = load_inventory(inventory_path, ssh) if inventory_path else None
        default = _default_inventory() if inventory is None else None
        if default is not None:
            label = default[1]
            try:
                inventory = load_inventory(default[0], ssh)
            except InventoryError as exc:
                unused = str(exc)
                click.echo(f"gpudiag: warning: {label} not used: {unused}", err=True)
        for why in inventory.skipped_sources if inventory is not None else []:
            click.echo(f"gpudiag: warning: inventory source skipped: {why}", err=True)
        if not targets and limit and inventory is not None:
            targets = ("all",)
        if not targets:
            raise UserError("no targets given (try `localhost`, a host, a group, or `all` with -i)")
        hosts = resolve_targets(list(targets), inventory, python, ssh_config=ssh, limit=limit)
    except InventoryError as exc:
        relevant = unused and not isinstance(exc, PatternError)  # a bad range is wrong with or without it
        because = f" ({label} was not used: it does not load)" if relevant else ""
        raise UserError(f"{exc}{because}") from None
    _warn_unhonoured(hosts, inventory)
    remember_resolution(ssh)
    return hosts


def _default_inventory() -> tuple[str | list[str], str] | None:
    """(what to load, how to name it) when no -i is given: ./inventory.yaml, else Ansible's default."""
    if Path(DEFAULT_INVENTORY).is_file():
        return DEFAULT_INVENTORY, DEFAULT_INVENTORY
    ansible = default_sources()
    if ansible is None:
        return None
    sources, named_in = ansible
    return sources, f"the inventory named in {named_in} ({','.join(sources)})"


def _warn_unhonoured(hosts: list[Host], inventory: Inventory | None) -> None:
    """One stderr line per targeted host and inventory setting gpudiag cannot honour; a skipped host says
    why it will not be scanned. Hosts that were not targeted stay silent."""
    for host in hosts:
        for note in inventory.notes.get(host.name, []) if inventory is not None else []:
            click.echo(f"gpudiag: warning: {host.name}: {note}", err=True)
        if host.skip_reason:
            click.echo(f"gpudiag: warning: {host.name}: not scanned: {host.skip_reason}", err=True)


def listed_names(value: str | None, option: str) -> list[str] | None:
    """A comma-separated option's names; None when the option was not given. A value that names
    nothing (`""`, `,,`) is a usage error, never the default in disguise."""
    if value is None:
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise UserError(f"{option} {value!r} names nothing: give comma-separated names, or leave the option out")
    return names


class RecordedKeys:
    """What --accept-new (or a host's StrictHostKeyChecking accept-new) added to the known-hosts files
    during one command, said afterwards: one stderr line per key with its SHA256 fingerprint (as
    `ssh-keygen -lf` shows it), so a user can check the keys that were trusted on first use."""

    def __init__(self, known_hosts: str | None, accept_new: bool, hosts: list[Host] | None = None):
        options = [h.ssh for h in hosts or [] if h.ssh is not None and (accept_new or h.ssh.accept_new)]
        paths = [Path(o.record_to) for o in options if o.record_to]
        if accept_new or any(o.record_to is None for o in options):  # hostkeys imports paramiko: only then
            from gpudiag.transports.hostkeys import own_known_hosts_path

            paths.append(own_known_hosts_path(known_hosts))
        self.paths = [p for p in dict.fromkeys(paths) if p != Path(os.devnull)]
        self.before = {path: set(self._lines(path)) for path in self.paths}

    @staticmethod
    def _lines(path: Path) -> list[str]:
        try:
            return path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def __enter__(self) -> "RecordedKeys":
        return self

    def __exit__(self, *exc: object) -> None:
        self.report()  # interrupted or not: keys recorded before the end are in the file

    def report(self) -> None:
        for path in self.paths:
            for line in self._lines(path):
                if line in self.before[path] or len(line.split()) < 3:
                    continue
                name, key_type, blob = line.split()[:3]
                try:
                    digest = hashlib.sha256(base64.b64decode(blob, validate=True)).digest()
                except ValueError:
                    continue
                shown = "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
                click.echo(f"gpudiag: recorded the host key of {name}: {key_type} {shown} in {path}", err=True)


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
