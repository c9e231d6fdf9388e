"""Ad-hoc targets: `localhost`, `host`, `user@host:port`, `[::1]:22`, bare IPv6; ssh config applies."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Mapping

from gpudiag.inventory.base import LOCAL_NAMES, InventoryError
from gpudiag.inventory.hosts import DEFAULT_PYTHON, HopResolver, LazyHosts, ssh_host
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError
from gpudiag.models import Host, safe_file_name

COMMAND_LINE = "command line"
_ADHOC = re.compile(
    r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.%]+)\]|(?P<host>[^:@\s\[\]]+))"
    r"(?::(?P<port>\d+))?$"
)
_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")


def default_ssh_config() -> SshConfig:
    try:
        return SshConfig()
    except SshConfigError as exc:
        raise InventoryError(str(exc)) from None


def parse_adhoc(target: str, python: str | None = None, ssh_config: SshConfig | None = None) -> Host:
    """`localhost`/`local` → local transport; `[user@]host[:port]` (host may be an ssh alias) → ssh."""
    common: dict[str, Any] = dict(
        python=python or DEFAULT_PYTHON, python_explicit=python is not None, source=COMMAND_LINE
    )
    if target in LOCAL_NAMES:
        return Host(name="localhost", address="localhost", transport="local", **common)
    parsed = split_target(target)
    if parsed is None:
        raise InventoryError(f"target {target!r}: not a host name, inventory name or [user@]host[:port]")
    user, address, port = parsed
    ssh = ssh_config or default_ssh_config()
    try:
        return ssh_host(
            safe_file_name(target),
            address,
            user=user,
            port=port,
            identity_file=None,
            jump=None,
            hops=HopResolver(ssh),
            **common,
        )
    except InventoryError as exc:
        raise InventoryError(f"target {target!r}: {exc}") from None


def lookup_keys(names: list[str], hosts: Mapping[str, Host]) -> list[tuple[str, str | None, int | None]]:
    """The (name, user, port) ssh config lookups that resolving `names` (inventory names, else ad-hoc
    `[user@]host[:port]`) will make first; jump hosts are looked up as they come."""
    keys = []
    for name in names:
        if isinstance(hosts, LazyHosts) and name in hosts:
            keys += hosts.pending_lookups([name])
        elif name not in hosts and name not in LOCAL_NAMES and split_target(name) is not None:
            user, address, port = split_target(name) or (None, name, None)
            keys.append((address, user, port))
    return keys


def split_target(target: str) -> tuple[str | None, str, int | None] | None:
    """(user, address, port) for a plausible `[user@]host[:port]`, `[v6]:port` or bare IPv6; else None."""
    user, at, rest = target.rpartition("@")
    if at and (not user or any(c.isspace() for c in user)):
        return None
    if rest.count(":") >= 2 and not rest.startswith("[") and is_ip(rest):
        return user or None, rest, None
    match = _ADHOC.match(rest)
    if not match:
        return None
    address = match.group("v6") or match.group("host")
    if (match.group("v6") and not is_ip(address)) or (match.group("host") and not _plausible_name(address)):
        return None
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise InventoryError(f"target {target!r}: port {port} is out of range (1-65535)")
    return user or None, address, port


def is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
        return True
    except ValueError:
        return False


def _plausible_name(name: str) -> bool:
    return len(name) <= 253 and all(_LABEL.match(label) for label in name.removesuffix(".").split("."))


def may_be_typo(target: str) -> bool:
    """A bare name (no user, no port) that is not an IP address: it could be a misspelt inventory name."""
    return re.fullmatch(r"[\w.-]+", target) is not None and not is_ip(target)
