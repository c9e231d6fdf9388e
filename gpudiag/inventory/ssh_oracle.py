"""OpenSSH itself as a check on gpudiag's own reading of the ssh config, for `gpudiag hosts`.

Hosts are resolved by `ssh -G` itself where it can (ssh_openssh.py). For those gpudiag's own reader
resolved instead (HOME is not the account's home, ssh -G failed), each host the ssh config alone decides
(a bare name on the command line: no inventory entry whose own values win, no user or port written) is
asked of `ssh -G [-F FILE] NAME`, and HostName, User and Port are compared: this says whether OpenSSH
agrees. Not asked when the config runs `Match exec` commands (ssh would run them a second time) or when
GPUDIAG_SSH_SYSTEM_CONFIG moves the system file (ssh cannot be told).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from shutil import which

from gpudiag.inventory.adhoc import COMMAND_LINE
from gpudiag.inventory.sshconfig import ENV_VAR, SYSTEM_ENV_VAR, SshConfig
from gpudiag.inventory.ssh_openssh import run_ssh_g
from gpudiag.inventory.sshconfig_match import DEFAULT_PORT, local_user
from gpudiag.models import Host

_BARE = re.compile(r"[A-Za-z0-9_][\w.-]*")


@dataclass(frozen=True)
class Check:
    """What `ssh -G` said of the hosts it was asked about: `checked` hosts, `differences` one line each, or
    `skipped` saying why it was not asked at all."""

    checked: int = 0
    differences: tuple[str, ...] = ()
    skipped: str = ""


def check_hosts(hosts: list[Host], ssh: SshConfig) -> Check:
    program = which("ssh")
    if program is None:
        return Check(skipped="ssh is not installed")
    if os.environ.get(SYSTEM_ENV_VAR) and not os.environ.get(ENV_VAR):
        return Check(skipped=f"{SYSTEM_ENV_VAR} names a system config ssh would not read")
    if ssh.runs_commands():
        return Check(skipped="the ssh config runs Match exec commands")
    asked = [h for h in hosts if h.transport == "ssh" and h.source == COMMAND_LINE and _config_alone(h, ssh)]
    differences: list[str] = []
    for host in asked:
        theirs, why = _ssh_g(program, host)
        if theirs is None:  # a config ssh refuses (an option this ssh lacks): said once, no host blamed
            return Check(skipped=f"ssh -G failed: {why}")
        ours = {
            "hostname": host.address.lower(),
            "user": host.user or local_user(),
            "port": str(host.port or DEFAULT_PORT),
        }
        for key, value in ours.items():
            if theirs.get(key) != value:
                differences.append(f"{host.name}: {key} is {value} here, {theirs.get(key)} for ssh -G")
    return Check(checked=len(asked), differences=tuple(differences))


def _config_alone(host: Host, ssh: SshConfig) -> bool:
    """Whether the host is what the config gives its name alone (a bare name typed: no user@ or :port)."""
    if not _BARE.fullmatch(host.name):
        return False
    settings = ssh.lookup(host.name)
    return (settings.hostname, settings.user, settings.port) == (host.address, host.user, host.port)


def _ssh_g(program: str, host: Host) -> tuple[dict[str, str] | None, str]:
    """(ssh -G's settings, each key's first value, "") or (None, why: its first error line)."""
    argv = [program, "-G"]
    if os.environ.get(ENV_VAR):
        argv += ["-F", os.path.expanduser(os.environ[ENV_VAR])]
    found, why = run_ssh_g(argv + ["--", host.name])
    return ({key: values[0] for key, values in found.items() if values} if found is not None else None), why
