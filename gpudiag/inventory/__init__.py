"""Targets and inventories → a list of resolved Hosts.

Accepts gpudiag's own inventory form, Ansible's YAML inventory form (a top-level `all:`, or only
groups made of hosts/vars/children), host ranges and patterns, and ad-hoc targets (`localhost`, `host`,
`user@host:port`, `[::1]:22`); ~/.ssh/config applies to every ssh host. Errors are one line naming
file and line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpudiag.inventory.ansible import GROUP_KEYS, parse_ansible
from gpudiag.inventory.ansible_ini import looks_like_ini, read_ini
from gpudiag.inventory.adhoc import default_ssh_config, parse_adhoc
from gpudiag.inventory.base import Inventory, InventoryError, YamlFile
from gpudiag.inventory.hosts import HostBuilder
from gpudiag.inventory.native import TOP_KEYS as NATIVE_KEYS, parse_native
from gpudiag.inventory.sshconfig import SshConfig
from gpudiag.inventory.targets import resolve_targets

__all__ = ["Inventory", "InventoryError", "load_inventory", "parse_adhoc", "resolve_targets"]


def load_inventory(path: str | Path, ssh_config: SshConfig | None = None) -> Inventory:
    """Read an inventory in either form; every host comes back resolved (ssh_config applied)."""
    doc = _read(path)
    if doc.root is None:
        raise InventoryError(f"{doc.path}:1: the inventory is empty (expected `hosts:` or Ansible's `all:`)")
    ansible = _looks_like_ansible(doc.root)
    specs, groups = parse_ansible(doc) if ansible else parse_native(doc)
    builder = HostBuilder(specs, doc.path, ssh_config or default_ssh_config(), lenient=ansible)
    hosts = builder.build()
    groups["all"] = list(hosts)
    return Inventory(
        path=doc.path,
        hosts=hosts,
        groups=groups,
        form="ansible" if ansible else "gpudiag",
        notes=builder.notes,
        python_skips=builder.python_skips,
    )


def _read(path: str | Path) -> YamlFile:
    """The YAML forms, or Ansible's INI form (read into the same node tree)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return YamlFile(path)  # reports the problem in the one place that words it
    return read_ini(path, text) if looks_like_ini(text) else YamlFile(path)


def _looks_like_ansible(root: yaml.Node) -> bool:
    """A top-level `all:`, or (as in Ansible's own examples) only groups made of hosts/vars/children."""
    if not isinstance(root, yaml.MappingNode) or not root.value:
        return False
    keys = [k.value for k, _ in root.value]
    if "all" in keys:
        return True
    if any(key in NATIVE_KEYS for key in keys):
        return False
    return all(
        isinstance(v, yaml.MappingNode) and v.value and all(getattr(k, "value", None) in GROUP_KEYS for k, _ in v.value)
        for _, v in root.value
    )
