"""`gpudiag hosts`: what each target resolves to and how it is reached, without connecting."""

from __future__ import annotations

import json

import click
from rich.table import Table
from rich.text import Text

from gpudiag.cli.ssh_settings import ssh_resolution, warn_ignored_ssh_settings
from gpudiag.cli.common import (
    complete_targets,
    inventory_option,
    load_hosts,
)
from gpudiag.cli.table_console import table_console
from gpudiag.models import Host
from gpudiag.render.ssh_line import ssh_settings_line
from gpudiag.inventory.ssh_openssh import OPENSSH_LABEL
from gpudiag.render.safe_text import console as console_text
from gpudiag.inventory.ssh_oracle import Check, check_hosts
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError, config_path, system_config_path


def python_label(host: Host) -> str:
    return host.python if host.python_explicit else f"{host.python} (default)"


def route(host: Host) -> str:
    return f"not scanned: {host.skip_reason}" if host.skip_reason else host.describe_route()


@click.command()
@click.argument("targets", nargs=-1, shell_complete=complete_targets)
@inventory_option
@click.option("--python", help="Interpreter override, as for scan.")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved hosts as JSON.")
def hosts(targets: tuple[str, ...], inventory_path: str | None, python: str | None, as_json: bool) -> None:
    """Show what TARGETS (default: every inventory host) resolve to and how each is reached.

    Nothing connects: the route is read from the inventory, ~/.ssh/config then /etc/ssh/ssh_config (or
    GPUDIAG_SSH_CONFIG alone, `Match exec` commands included) and the target itself. Where ssh is installed,
    `ssh -G` resolves each host's ssh settings; where gpudiag's own reader does (the caption says which, and
    why), `ssh -G` is asked about the hosts the ssh config alone decides, and any difference is a warning.
    TARGETS may be ranges (gpu-[01-08]) and Ansible patterns (gpus:!gpu-02, a:&b, gpu-0*).
    """
    resolved = load_hosts(targets or ("all",), inventory_path, python)
    warn_ignored_ssh_settings(resolved)
    by = ssh_resolution([h.name for h in resolved])
    # OpenSSH checks gpudiag's own reader only: a host `ssh -G` resolved needs no second opinion from it
    oracle = _ask_openssh([h for h in resolved if not by.get(h.name, "").startswith(OPENSSH_LABEL)])
    if as_json:
        click.echo(
            json.dumps([dict(h.to_dict(), route=route(h), skip_reason=h.skip_reason) for h in resolved], indent=2)
        )
        return
    ssh_config, system = config_path(), system_config_path()
    read = f"{ssh_config}{'' if ssh_config.is_file() else ' (absent)'}"
    if system is not None and system.is_file():
        read += f", then {system}"
    if oracle.checked:
        read += f"; ssh -G agrees on {oracle.checked - len({d.split(':')[0] for d in oracle.differences})} of {oracle.checked}"
    elif oracle.skipped.startswith("ssh -G failed"):
        read += f"; {oracle.skipped}"
    table = Table(title=f"gpudiag hosts ({len(resolved)})", caption=Text(f"ssh config: {read}"))
    for column in ("name", "route", "python", "groups", "defined at"):
        table.add_column(column, overflow="fold", no_wrap=column in ("name", "defined at"))
    for h in resolved:
        # Every cell comes from the inventory or ssh config: plain Text, never parsed as rich markup.
        cells = (h.name, route(h), python_label(h), ",".join(h.groups) or "-", h.source)
        table.add_row(*(Text(console_text(cell)) for cell in cells))
    console = table_console()
    console.print(table)
    how = ssh_settings_line({"ssh_settings": {"resolved_by": by}})
    if how:  # a line of its own, never folded into the caption's width
        console.print(Text(console_text(how, 2000)))


def _ask_openssh(resolved: list[Host]) -> Check:
    """OpenSSH's `ssh -G` on the hosts the ssh config alone decides; each difference a warning on stderr."""
    try:
        oracle = check_hosts(resolved, SshConfig())
    except SshConfigError:
        return Check(skipped="the ssh config cannot be read")  # resolution already said why
    for line in oracle.differences:
        click.echo(f"gpudiag: warning: {console_text(line)}", err=True)
    return oracle
