"""Targets and inventories → a list of resolved Hosts.

Accepts gpudiag's own inventory form, Ansible's YAML inventory form (a top-level `all:`, or only
groups made of hosts/vars/children) and ad-hoc targets (`localhost`, `host`, `user@host:port`,
`[::1]:22`); ~/.ssh/config applies to every ssh host. Errors are one line naming file and line.
"""
from __future__ import annotations

import fnmatch
import ipaddress
import re
from pathlib import Path

import yaml

from gpudiag.inventory.ansible import GROUP_KEYS, parse_ansible
from gpudiag.inventory.base import LOCAL_NAMES, Inventory, InventoryError, YamlFile, suggest
from gpudiag.inventory.hosts import DEFAULT_PYTHON, HopResolver, HostBuilder, ssh_host
from gpudiag.inventory.native import TOP_KEYS as NATIVE_KEYS, parse_native
from gpudiag.models import Host, safe_file_name
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError

__all__ = ["Inventory", "InventoryError", "load_inventory", "parse_adhoc", "resolve_targets"]

COMMAND_LINE = "command line"
_ADHOC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.%]+)\]|(?P<host>[^:@\s\[\]]+))"
                    r"(?::(?P<port>\d+))?$")
_LABEL = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")
# how close a bare word must be to an inventory name to be taken for a typo rather than a new host
TYPO_CUTOFF = 0.8


def load_inventory(path: str | Path, ssh_config: SshConfig | None = None) -> Inventory:
    """Read an inventory in either form; every host comes back resolved (ssh_config applied)."""
    doc = YamlFile(path)
    if doc.root is None:
        raise InventoryError(f"{doc.path}:1: the inventory is empty (expected `hosts:` or Ansible's `all:`)")
    ansible = _looks_like_ansible(doc.root)
    specs, groups = parse_ansible(doc) if ansible else parse_native(doc)
    hosts = HostBuilder(specs, doc.path, ssh_config or _ssh_config()).build()
    groups["all"] = list(hosts)
    return Inventory(path=doc.path, hosts=hosts, groups=groups, form="ansible" if ansible else "gpudiag")


def _looks_like_ansible(root: yaml.Node) -> bool:
    """A top-level `all:`, or (as in Ansible's own examples) only groups made of hosts/vars/children."""
    if not isinstance(root, yaml.MappingNode) or not root.value:
        return False
    keys = [k.value for k, _ in root.value]
    if "all" in keys:
        return True
    if any(key in NATIVE_KEYS for key in keys):
        return False
    return all(isinstance(v, yaml.MappingNode) and v.value and
               all(getattr(k, "value", None) in GROUP_KEYS for k, _ in v.value) for _, v in root.value)


def _ssh_config() -> SshConfig:
    try:
        return SshConfig()
    except SshConfigError as exc:
        raise InventoryError(str(exc)) from None


def parse_adhoc(target: str, python: str | None = None, ssh_config: SshConfig | None = None) -> Host:
    """`localhost`/`local` → local transport; `[user@]host[:port]` (host may be an ssh alias) → ssh."""
    common = dict(python=python or DEFAULT_PYTHON, python_explicit=python is not None, source=COMMAND_LINE)
    if target in LOCAL_NAMES:
        return Host(name="localhost", address="localhost", transport="local", **common)  # type: ignore[arg-type]
    parsed = _split_target(target)
    if parsed is None:
        raise InventoryError(f"target {target!r}: not a host name, inventory name or [user@]host[:port]")
    user, address, port = parsed
    ssh = ssh_config or _ssh_config()
    try:
        return ssh_host(safe_file_name(target), address, user=user, port=port, identity_file=None, jump=None,
                        hops=HopResolver(ssh), **common)  # type: ignore[arg-type]
    except InventoryError as exc:
        raise InventoryError(f"target {target!r}: {exc}") from None


def _split_target(target: str) -> tuple[str | None, str, int | None] | None:
    """(user, address, port) for a plausible `[user@]host[:port]`, `[v6]:port` or bare IPv6; else None."""
    user, at, rest = target.rpartition("@")
    if at and (not user or any(c.isspace() for c in user)):
        return None
    if rest.count(":") >= 2 and not rest.startswith("[") and _is_ip(rest):
        return user or None, rest, None
    match = _ADHOC.match(rest)
    if not match:
        return None
    address = match.group("v6") or match.group("host")
    if (match.group("v6") and not _is_ip(address)) or (match.group("host") and not _plausible_name(address)):
        return None
    port = int(match.group("port")) if match.group("port") else None
    if port is not None and not 0 < port < 65536:
        raise InventoryError(f"target {target!r}: port {port} is out of range (1-65535)")
    return user or None, address, port


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
        return True
    except ValueError:
        return False


def _plausible_name(name: str) -> bool:
    return len(name) <= 253 and all(_LABEL.match(label) for label in name.removesuffix(".").split("."))


def _is_pattern(target: str) -> bool:
    """Shell-style wildcards select inventory names; `[` alone is a pattern only outside `[v6]:port`."""
    return "*" in target or "?" in target or ("[" in target and _split_target(target) is None)


def _may_be_typo(target: str) -> bool:
    """A bare name (no user, no port) that is not an IP address: it could be a misspelt inventory name."""
    return re.fullmatch(r"[\w.-]+", target) is not None and not _is_ip(target)


def resolve_targets(targets: list[str], inventory: Inventory | None, python: str | None = None,
                    ssh_config: SshConfig | None = None) -> list[Host]:
    """Each target as inventory group, host or pattern, or ad-hoc host; duplicates removed, order kept.

    `--python` (python) overrides every host's interpreter. Names stay unique: a different host that
    would share a name gets a `-2`, `-3` suffix.
    """
    resolver = _Resolver(inventory, ssh_config)
    by_name: dict[str, Host] = {}
    for target in targets:
        for host in resolver.resolve(target):
            if python:
                host = host.with_(python=python, python_explicit=True)
            _add_unique(by_name, host)
    if not by_name:
        raise InventoryError(f"{' '.join(targets) or 'no targets'}: selects no hosts")
    return list(by_name.values())


def _add_unique(by_name: dict[str, Host], host: Host) -> None:
    name, n = host.name, 2
    while name in by_name:
        if by_name[name] == host.with_(name=name):
            return   # the same host, selected again
        name, n = f"{host.name}-{n}", n + 1
    by_name[name] = host.with_(name=name)


class _Resolver:
    def __init__(self, inventory: Inventory | None, ssh_config: SshConfig | None):
        self.inventory = inventory
        self._ssh = ssh_config

    @property
    def ssh(self) -> SshConfig:
        if self._ssh is None:
            self._ssh = _ssh_config()
        return self._ssh

    def resolve(self, target: str) -> list[Host]:
        if not target.strip():
            raise InventoryError("empty target")
        inv = self.inventory
        if inv is not None:
            found = self._from_inventory(inv, target)
            if found is not None:
                return found
        elif target == "all":
            raise InventoryError("target 'all' needs an inventory: pass -i FILE (or have inventory.yaml here)")
        if target in LOCAL_NAMES:
            return [parse_adhoc(target)]
        plausible = _split_target(target) is not None
        if not plausible:
            raise InventoryError(f"target {target!r}: not {self._known_kinds()}a host name or "
                                 f"[user@]host[:port]{self._suggest(target, 0.6)}")
        if inv is not None and _may_be_typo(target) and target not in self.ssh.aliases():
            hint = self._suggest(target, TYPO_CUTOFF)
            if hint:
                raise InventoryError(f"target {target!r} is not a host or group in {inv.path}{hint}; "
                                     f"write {target}:22 to reach it as a plain ssh host")
        return [parse_adhoc(target, ssh_config=self.ssh)]

    def _from_inventory(self, inv: Inventory, target: str) -> list[Host] | None:
        """The hosts a name or pattern selects: a group's hosts, plus a host of the same name; None: no match."""
        names: list[str] = []
        if _is_pattern(target):
            for group in (g for g in inv.groups if fnmatch.fnmatchcase(g, target)):
                names += inv.groups[group]
            names += [h for h in inv.hosts if fnmatch.fnmatchcase(h, target)]
            if not names:
                raise InventoryError(f"pattern {target!r} matches no host or group in {inv.path}")
        else:
            if target not in inv.groups and target not in inv.hosts:
                return None
            names = list(inv.groups.get(target, [])) + ([target] if target in inv.hosts else [])
        return [inv.hosts[n] for n in dict.fromkeys(names)]

    def _known_kinds(self) -> str:
        return "an inventory host or group, nor " if self.inventory is not None else ""

    def _suggest(self, target: str, cutoff: float) -> str:
        if self.inventory is None:
            return ""
        return suggest(target, list(self.inventory.hosts) + list(self.inventory.groups), cutoff)
