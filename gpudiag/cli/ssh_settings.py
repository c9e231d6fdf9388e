"""A command's ssh settings: the config it reads (resolved by `ssh -G` where ssh is installed), what its
hosts' lookups could not honour (warned on stderr), and how each host was resolved (stored with the run)."""

from __future__ import annotations

import click

from gpudiag.inventory.ssh_openssh import use_openssh
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError
from gpudiag.models import Host

SSH_NOTES_KEY = "gpudiag.ssh_notes"
SSH_RESOLVED_KEY = "gpudiag.ssh_resolved_by"


def command_ssh_config() -> SshConfig | None:
    """The user's ssh config, read once per command, hosts resolved by `ssh -G` where it can; None when
    unreadable (the error is raised where an ssh host needs it, so `localhost` never depends on it)."""
    try:
        config = SshConfig()
    except SshConfigError:
        return None
    use_openssh(config)
    return config


def remember_resolution(ssh: SshConfig | None) -> None:
    """What the lookups of load_hosts found, for the warnings and the stored run."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ssh is not None:
        ctx.meta[SSH_NOTES_KEY] = ssh.notes_by_host
        ctx.meta[SSH_RESOLVED_KEY] = ssh.resolved_by


def ssh_resolution(names: list[str]) -> dict[str, str]:
    """Host name → how its ssh settings were resolved (`ssh -G` (VERSION), or gpudiag's own reader and
    why), for the named hosts that go over ssh."""
    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(SSH_RESOLVED_KEY, {}) if ctx is not None else {}
    return {name: found[name] for name in names if name in found}


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
        return []  # an unreadable config already stopped resolution with its own error
    ctx = click.get_current_context(silent=True)
    recorded = ctx.meta.get(SSH_NOTES_KEY) if ctx is not None else None
    lines = []
    for host in ssh_hosts:
        if recorded is not None:  # what load_hosts' own lookups found: no second lookup, no second exec
            notes = dict.fromkeys(recorded.get(host.name, ()))
        else:  # the alias the user wrote is the host's name or its address before HostName mapped it
            notes = dict.fromkeys(config.ignored(host.name) + config.ignored(host.address))
        # a note from the config itself says `line N`; one from an included file keeps that file's name
        shown = [f"line {n[len(str(config.path)) + 1 :]}" if n.startswith(f"{config.path}:") else n for n in notes]
        if shown:
            lines.append(f"{host.name}: {config.path}: {'; '.join(shown)}")
    return lines
