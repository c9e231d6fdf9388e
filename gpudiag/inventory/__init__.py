"""Targets and inventories → a list of resolved Hosts.

Accepts gpudiag's own inventory form, Ansible's inventories (YAML with a top-level `all:` or only
groups made of hosts/vars/children, INI, a directory of them, with group_vars/ and host_vars/), host ranges and patterns, and ad-hoc targets (`localhost`, `host`,
`user@host:port`, `[::1]:22`); ~/.ssh/config applies to every ssh host. Errors are one line naming
file and line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpudiag.inventory.ansible import GROUP_KEYS, parse_ansible
from gpudiag.inventory.ansible_ini import looks_like_ini, read_ini
from gpudiag.inventory.ansible_oracle import host_list_doc, is_host_list, through_ansible
from gpudiag.inventory.adhoc import default_ssh_config, parse_adhoc
from gpudiag.inventory.ansible_sources import MAX_SOURCES, inventory_files, unread_source, vars_basedir
from gpudiag.inventory.base import HostSpec, Inventory, InventoryError, YamlFile
from gpudiag.inventory.hosts import HostBuilder
from gpudiag.inventory.native import TOP_KEYS as NATIVE_KEYS, parse_native
from gpudiag.inventory.sshconfig import SshConfig
from gpudiag.inventory.targets import resolve_targets

__all__ = ["Inventory", "InventoryError", "load_inventory", "parse_adhoc", "resolve_targets"]


def load_inventory(path: str | Path | list[str], ssh_config: SshConfig | None = None) -> Inventory:
    """Read an inventory in either form; every host comes back resolved (ssh_config applied).

    `path` may be a directory of Ansible sources, or several sources (as ansible.cfg may name them)."""
    if not isinstance(path, list) and is_host_list(str(path)):
        return _inventory(str(path), *parse_ansible([host_list_doc(str(path))]), ssh_config, "ansible")
    sources = [Path(p) for p in path] if isinstance(path, list) else [Path(path)]
    shown = str(path) if not isinstance(path, list) else ",".join(path)
    if len(sources) == 1 and not sources[0].is_dir() and not unread_source(sources[0]):
        doc = _read(sources[0])
        if doc.root is None:
            raise InventoryError(f"{doc.path}:1: the inventory is empty (expected `hosts:` or Ansible's `all:`)")
        if not _looks_like_ansible(doc.root):
            specs, groups = parse_native(doc)
            return _inventory(shown, specs, groups, ssh_config, "gpudiag")
    skipped: list[str] = []
    specs, groups = parse_ansible(_ansible_docs(sources, shown, skipped), [vars_basedir(s) for s in sources])
    inventory = _inventory(shown, specs, groups, ssh_config, "ansible")
    inventory.skipped_sources = skipped
    return inventory


def _inventory(
    path: str, specs: list[HostSpec], groups: dict[str, list[str]], ssh: SshConfig | None, form: str
) -> Inventory:
    builder = HostBuilder(specs, path, ssh or default_ssh_config())
    hosts = builder.build()
    if form == "gpudiag":
        groups["all"] = list(hosts)  # file order (an Ansible inventory's `all` is in Ansible's order)
    return Inventory(
        path=path, hosts=hosts, groups=groups, form=form, notes=builder.notes, python_skips=builder.python_skips
    )


def _ansible_docs(sources: list[Path], shown: str, skipped: list[str]) -> list[YamlFile]:
    """Every Ansible source file, in Ansible's order; empty files add nothing. Inside a directory, what
    gpudiag cannot read as an inventory file (a script, an inventory plugin's configuration) is skipped
    with the reason in `skipped`; named alone, it is an error."""
    docs = []
    for source in sources:
        files = inventory_files(source)
        if len(files) > MAX_SOURCES:
            raise InventoryError(f"{source}: more than {MAX_SOURCES} inventory files")
        for file in files:
            why = unread_source(file)
            if why:  # a script or a plugin: Ansible's own answer where ansible-core is installed
                listed, failure = through_ansible(file)
                if listed is not None:
                    docs += [listed] if listed.root is not None else []
                    continue
                why = f"{why}; {failure}"
            if why and (source.is_dir() or len(sources) > 1):
                skipped.append(f"{file}: {why}")
                continue
            if why:
                raise InventoryError(f"{file}: {why}")
            doc = _read(file)
            if doc.root is None:
                continue
            if not _looks_like_ansible(doc.root):
                raise InventoryError(
                    f"{doc.path}:1: not an Ansible inventory (gpudiag's own form cannot be one of several sources)"
                )
            docs.append(doc)
    if not docs:
        raise InventoryError(f"{shown}: no inventory hosts in it (every file is empty or ignored)")
    return docs


def _read(path: Path) -> YamlFile:
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
