"""Targets and inventories → a list of resolved Hosts.

Accepts gpudiag's own inventory form, Ansible's YAML inventory form, and ad-hoc targets
(`localhost`, `host`, `user@host:port`). Errors name the file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpudiag.models import Host

LOCAL_NAMES = ("localhost", "local")


class InventoryError(ValueError):
    """Bad inventory or target; the message is one line, with file:line where there is a file."""


@dataclass
class Inventory:
    path: str | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)


_ADHOC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>\[[0-9a-fA-F:]+\]|[^:@\s]+)(?::(?P<port>\d+))?$")


def parse_adhoc(target: str, python: str | None = None) -> Host:
    """`localhost` → local transport; `[user@]host[:port]` → ssh."""
    if target in LOCAL_NAMES:
        return Host(name="localhost", address="localhost", transport="local", python=python or "python3",
                    python_explicit=python is not None, source="command line")
    match = _ADHOC.match(target)
    if not match:
        raise InventoryError(f"target {target!r}: not a host name, inventory name or user@host:port")
    host = match.group("host").strip("[]")
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise InventoryError(f"target {target!r}: port {port} is out of range")
    return Host(name=target.replace(":", "_") if port else (target if "@" not in target else target),
                address=host, transport="ssh", user=match.group("user"), port=port,
                python=python or "python3", python_explicit=python is not None, source="command line")


def load_inventory(path: str | Path) -> Inventory:
    raise InventoryError(f"{path}: inventories are not supported yet")


def resolve_targets(targets: list[str], inventory: Inventory | None, python: str | None = None) -> list[Host]:
    """Each target as inventory host, inventory group, or ad-hoc target; duplicates removed, order kept."""
    hosts: list[Host] = []
    seen: set[str] = set()
    for target in targets:
        for host in _resolve_one(target, inventory, python):
            if host.name not in seen:
                seen.add(host.name)
                hosts.append(host)
    return hosts


def _resolve_one(target: str, inventory: Inventory | None, python: str | None) -> list[Host]:
    if inventory is not None:
        if target in inventory.hosts:
            return [_with_python(inventory.hosts[target], python)]
        if target in inventory.groups:
            return [_with_python(inventory.hosts[n], python) for n in inventory.groups[target]]
    return [parse_adhoc(target, python)]


def _with_python(host: Host, python: str | None) -> Host:
    return host.with_(python=python, python_explicit=True) if python else host
