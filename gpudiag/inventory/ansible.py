"""Ansible's inventory (YAML form, or INI read into the same tree), read as Ansible reads it: `all:` with
`hosts` / `vars` / `children` (recursive), `ungrouped`, several sources merged in order, and the
`group_vars/` and `host_vars/` beside them. Variable precedence, low to high: inventory group vars
(`all`, then shallower before deeper groups, ties by name), group_vars/all, group_vars/GROUP (same
order), inventory host vars, host_vars/HOST. A setting gpudiag cannot honour is recorded on the host,
never raised: a host nobody targets never blocks the command."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpudiag.inventory.patterns import expand_host_range
from gpudiag.inventory.base import (
    MAX_PORT,
    HostSpec,
    InventoryError,
    Unhonoured,
    YamlFile,
    line_of,
    suggest,
)
from gpudiag.inventory.ansible_ini import IniFile
from gpudiag.inventory.ansible_sources import remote_user, vars_files
from gpudiag.inventory.ansible_vars import CONTAINER_CONNECTIONS, FIELDS, SSH_CONNECTIONS, read_vars

GROUP_KEYS = ("hosts", "vars", "children")
_HOST_PORT = re.compile(r"^[^:\[\]]+:\d+$")


@dataclass
class Group:
    name: str
    line: int
    path: str = ""
    hosts: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


class AnsibleReader:
    def __init__(self, docs: list[YamlFile], basedirs: list[Path]):
        self.docs = docs
        self.doc = docs[0]
        self.basedirs = basedirs  # where group_vars/ and host_vars/ are looked for
        self.groups: dict[str, Group] = {}
        self.host_vars: dict[str, dict[str, Any]] = {}
        self.host_lines: dict[str, tuple[str, int]] = {}
        self.flat: dict[str, list[str]] = {}
        self._depths: dict[str, int] = {}
        self._file_vars: dict[tuple[str, str], dict[str, Any]] = {}
        self._ini_top: set[str] = set()  # groups an INI file put under `all` only to declare them
        self.remote_user = remote_user()  # ansible.cfg's, for hosts whose variables name no user

    def read(self) -> tuple[list[HostSpec], dict[str, list[str]]]:
        for doc in self.docs:
            self.doc = doc
            self._ensure("all", doc.root)
            for name, key_node, value in doc.mapping(doc.root, "the inventory", False):
                self._group(name, key_node, value, parent=None if name == "all" else "all")
            if isinstance(doc, IniFile):
                self._ini_top |= {name for name in self.groups if name != "all"}
        self._detach_ini_children()
        self._check_cycles()
        self._fill_ungrouped()
        for group in self.groups:
            self._hosts_of(group)
        members = {g: set(hosts) for g, hosts in self.flat.items()}
        specs = [self._spec(host, [g for g in self.groups if host in members[g]]) for host in self.host_vars]
        return specs, self.flat

    def _group(self, name: str, key_node: yaml.Node, node: yaml.Node, parent: str | None) -> None:
        group = self._ensure(name, key_node)
        if parent is not None and parent not in group.parents:
            group.parents.append(parent)
            self._ensure(parent, key_node).children.append(name)
        for key, sub_key, value in self.doc.mapping(node, f"group {name!r}"):
            if key not in GROUP_KEYS:
                raise self.doc.error(
                    sub_key,
                    f"group {name!r}: unknown key {key!r}{suggest(key, GROUP_KEYS)}; expected {', '.join(GROUP_KEYS)}",
                )
            if key == "hosts":
                for host_key, host_key_node, host_node in self.doc.mapping(value, f"group {name!r}: hosts"):
                    for host in expand_host_range(self.doc, host_key, host_key_node):
                        self._host(host, host_key_node, host_node, group)
            elif key == "vars":
                group.vars.update(read_vars(self.doc, value, f"group {name!r}: vars"))
            else:
                for child, child_key, child_node in self.doc.mapping(value, f"group {name!r}: children"):
                    self._group(child, child_key, child_node, parent=name)

    def _ensure(self, name: str, node: yaml.Node | None) -> Group:
        return self.groups.setdefault(name, Group(name, line_of(node), self.doc.path))

    def _host(self, written: str, key_node: yaml.Node, node: yaml.Node, group: Group) -> None:
        host, _, port = written.rpartition(":") if _HOST_PORT.match(written) else (written, "", "")
        self.host_lines.setdefault(host, (self.doc.path, line_of(key_node)))
        self.host_vars.setdefault(host, {}).update(read_vars(self.doc, node, f"host {host!r}"))
        if port:  # `name:port` as a host key, which Ansible accepts too
            if not 0 < int(port) <= MAX_PORT:
                raise self.doc.error(key_node, f"host {host!r}: port {port} is out of range (1-{MAX_PORT})")
            self.host_vars[host].setdefault("ansible_port", int(port))
        if host not in group.hosts:
            group.hosts.append(host)

    def _check_cycles(self) -> None:
        done: set[str] = set()

        def visit(name: str, stack: tuple[str, ...]) -> None:
            for child in self.groups[name].children:
                if child in stack:
                    cycle = " → ".join(stack[stack.index(child) :] + (child,))
                    where = self.groups[child]
                    raise InventoryError(f"{where.path}:{where.line}: groups form a cycle: {cycle}")
                if child not in done:
                    visit(child, stack + (child,))
            done.add(name)

        for name in list(self.groups):  # from `all` first, then any group not reachable from it
            if name not in done:
                visit(name, (name,))

    def _fill_ungrouped(self) -> None:
        grouped = {h for name, g in self.groups.items() if name not in ("all", "ungrouped") for h in g.hosts}
        ungrouped = [h for h in self.host_vars if h not in grouped]
        if ungrouped or "ungrouped" in self.groups:
            group = self.groups.setdefault("ungrouped", Group("ungrouped", 1, parents=["all"]))
            # as Ansible reconciles it: a host that has a group of its own leaves `ungrouped`
            group.hosts = [h for h in dict.fromkeys(group.hosts + ungrouped) if h not in grouped]
            if "ungrouped" not in self.groups["all"].children:
                self.groups["all"].children.insert(0, "ungrouped")  # Ansible creates it first

    def _detach_ini_children(self) -> None:
        """As Ansible reconciles an INI file: only a group with no other parent is a child of `all`."""
        top = self.groups["all"]
        for name in self._ini_top:
            group = self.groups[name]
            if "all" in group.parents and len(group.parents) > 1:
                group.parents.remove("all")
                top.children.remove(name)

    def _hosts_of(self, name: str) -> list[str]:
        """A group's hosts in Ansible's order (Group.get_hosts): its own, then its descendants' level
        by level, each level in the order the groups were declared."""
        if name not in self.flat:
            order, level, seen = [name], list(self.groups[name].children), {name}
            while level:
                level = [g for g in dict.fromkeys(level) if g not in seen]
                order += level
                seen.update(level)
                level = [c for g in level for c in self.groups[g].children]
            members = [h for g in order for h in self.groups[g].hosts]
            if name == "all":
                members += list(self.host_vars)  # every host, those of no group too
            self.flat[name] = list(dict.fromkeys(members))
        return self.flat[name]

    def _depth(self, name: str) -> int:
        if name not in self._depths:
            parents = self.groups[name].parents
            self._depths[name] = 0 if name == "all" or not parents else 1 + max(self._depth(p) for p in parents)
        return self._depths[name]

    def _files_vars(self, subdir: str, name: str) -> dict[str, Any]:
        """group_vars/NAME or host_vars/NAME beside every source, merged in source and file order."""
        key = (subdir, name)
        if key not in self._file_vars:
            merged: dict[str, Any] = {}
            for basedir in self.basedirs:
                for path in vars_files(basedir, subdir, name):
                    merged.update(read_vars_file(path))
            self._file_vars[key] = merged
        return self._file_vars[key]

    def _spec(self, host: str, containing: list[str]) -> HostSpec:
        """The host's record, its variables merged in Ansible's precedence (see the module docstring)."""
        merged: dict[str, Any] = {}
        ordered = sorted(containing, key=lambda g: (self._depth(g), g))  # `all` first: depth 0
        for group in ordered:
            merged.update(self.groups[group].vars)
        for group in ordered:
            merged.update(self._files_vars("group_vars", group))
        merged.update(self.host_vars[host])
        merged.update(self._files_vars("host_vars", host))
        path, line = self.host_lines[host]
        spec = HostSpec(name=host, line=line, path=path, groups=sorted(g for g in containing if g != "all"))
        for key, value in merged.items():
            target = FIELDS.get(key)
            if isinstance(value, Unhonoured):
                spec.problems.append(value)
            elif target is None:
                if value is not None:
                    spec.vars[key] = value
            elif target == "connection" and value is not None:
                spec.local = value not in SSH_CONNECTIONS
                spec.connection = value
            elif value is not None:
                setattr(spec, target, value)
        if spec.user is None and not spec.local and spec.connection not in CONTAINER_CONNECTIONS:
            spec.user = self.remote_user
        _apply_container_connection(spec, merged)
        return spec


def _apply_container_connection(spec: HostSpec, merged: dict[str, Any]) -> None:
    """docker/podman/kubectl connections exec from this machine into the container Ansible would use:
    ansible_host (else the inventory name) names the container or pod."""
    engine = CONTAINER_CONNECTIONS.get(spec.connection or "")
    if engine is None:
        return
    name = spec.address or spec.name
    if engine == "kubectl":
        name = merged.get("ansible_kubectl_pod") or name
        namespace = merged.get("ansible_kubectl_namespace")
        name = f"{namespace}/{name}" if namespace else name
        if merged.get("ansible_kubectl_container"):
            spec.problems.append(
                Unhonoured(
                    "ansible_kubectl_container",
                    f"host {spec.name!r}: "
                    f"ansible_kubectl_container is not supported (the pod's default "
                    f"container is used)",
                    blocking=True,
                )
            )
    if spec.user and engine != "kubectl":
        spec.problems.append(
            Unhonoured(
                "ansible_user",
                f"host {spec.name!r}: ansible_user {spec.user!r} for a "
                f"{engine} connection is not supported (the container's default user "
                f"runs the probes)",
                blocking=False,
            )
        )
    spec.container, spec.address, spec.user, spec.port = f"{engine}:{name}", None, None, None


def parse_ansible(
    docs: list[YamlFile], basedirs: list[Path] | None = None
) -> tuple[list[HostSpec], dict[str, list[str]]]:
    return AnsibleReader(docs, basedirs or []).read()


VAULT_HEADER = "$ANSIBLE_VAULT;"


def read_vars_file(path: Path) -> dict[str, Any]:
    """One vars file's variables. A file gpudiag cannot read becomes one Unhonoured entry (under a key
    no variable can have), so it reaches every host that file applies to and no other."""
    marker = f"<{path}>"
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(len(VAULT_HEADER))
    except (OSError, UnicodeDecodeError) as exc:
        return {marker: Unhonoured(marker, f"{path}: cannot read vars file: {exc}", blocking=True)}
    if head == VAULT_HEADER:
        reason = (
            f"{path}:1: vault-encrypted vars file not read (gpudiag does not decrypt vaults); its values are not used"
        )
        return {marker: Unhonoured(marker, reason, blocking=False)}
    try:
        doc = YamlFile(path)
    except InventoryError as exc:
        message = (
            str(exc)
            .replace("the inventory must", "the vars file must")
            .replace("cannot read inventory", "cannot read vars file")
        )
        return {marker: Unhonoured(marker, message, blocking=True)}
    try:
        return read_vars(doc, doc.root, str(path))
    except InventoryError as exc:  # a duplicate key, a bad merge key
        return {marker: Unhonoured(marker, str(exc), blocking=True)}
