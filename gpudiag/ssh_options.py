"""What a host's ssh config decides beyond where the host is, as `ssh -G` resolved it: the keys offered,
the known-hosts files, StrictHostKeyChecking and ConnectTimeout. Read by the ssh transport; a host with
none (local, or resolved by gpudiag's own ssh_config reader) keeps gpudiag's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SshOptions:
    identity_files: tuple[str, ...] = ()  # every IdentityFile, expanded, in ssh's order; () = the default keys
    known_hosts: tuple[str, ...] = ()  # UserKnownHostsFile then GlobalKnownHostsFile; () = gpudiag's defaults
    record_to: str | None = None  # the first UserKnownHostsFile, where a new key is recorded; None = own file
    accept_new: bool = False  # StrictHostKeyChecking accept-new (or no/off, taken as accept-new)
    connect_timeout: float | None = None  # ConnectTimeout; None = not set


# ssh_config keyword → its name: what only a host resolved by `ssh -G` honours (gpudiag's own reader names
# them in the host's warning, whatever their value).
SSH_G_ONLY = {
    "stricthostkeychecking": "StrictHostKeyChecking",
    "userknownhostsfile": "UserKnownHostsFile",
    "globalknownhostsfile": "GlobalKnownHostsFile",
    "connecttimeout": "ConnectTimeout",
}
