"""Ansible's YAML inventory form, read as Ansible reads it: `all:` with `hosts` / `vars` / `children`
(recursive), group vars inherited (child groups over parents, host vars over groups), `ungrouped`."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpudiag.inventory.base import MAX_PORT, HostSpec, YamlFile, expand_host_range, line_of, suggest
from gpudiag.transports.container import parse_container

GROUP_KEYS = ("hosts", "vars", "children")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh")
# inventory variable → HostSpec field
FIELDS = {"ansible_host": "address", "ansible_ssh_host": "address", "ansible_port": "port",
          "ansible_ssh_port": "port", "ansible_user": "user", "ansible_ssh_user": "user",
          "ansible_ssh_private_key_file": "identity_file", "ansible_private_key_file": "identity_file",
          "ansible_python_interpreter": "python", "ansible_connection": "local",
          "ansible_ssh_common_args": "jump", "ansible_ssh_extra_args": "jump",
          "gpudiag_container": "container", "gpudiag_jump": "jump", "gpudiag_server_log": "server_log"}
_HOST_PORT = re.compile(r"^[^:\[\]]+:\d+$")
_PROXY_JUMP = re.compile(r"^(?:-J(?P<short>.*)|-oProxyJump=(?P<long>.*))$", re.IGNORECASE)


@dataclass
class Group:
    name: str
    line: int
    hosts: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


class AnsibleReader:
    def __init__(self, doc: YamlFile):
        self.doc = doc
        self.groups: dict[str, Group] = {}
        self.host_vars: dict[str, dict[str, Any]] = {}
        self.host_lines: dict[str, int] = {}
        self.flat: dict[str, list[str]] = {}
        self._depths: dict[str, int] = {}

    def read(self) -> tuple[list[HostSpec], dict[str, list[str]]]:
        self._ensure("all", self.doc.root)
        for name, key_node, value in self.doc.mapping(self.doc.root, "the inventory", False):
            self._group(name, key_node, value, parent=None if name == "all" else "all")
        self._check_cycles()
        self._fill_ungrouped()
        for group in self.groups:
            self._hosts_of(group)
        members = {g: set(hosts) for g, hosts in self.flat.items()}
        specs = [self._spec(host, [g for g in self.groups if host in members[g]]) for host in self.host_vars]
        return specs, self.flat

    def _group(self, name: str, key_node: yaml.Node, node: yaml.Node, parent: str | None) -> None:
        group = self.groups.setdefault(name, Group(name, line_of(key_node)))
        if parent is not None and parent not in group.parents:
            group.parents.append(parent)
            self._ensure(parent, key_node).children.append(name)
        for key, sub_key, value in self.doc.mapping(node, f"group {name!r}"):
            if key not in GROUP_KEYS:
                raise self.doc.error(sub_key, f"group {name!r}: unknown key {key!r}{suggest(key, GROUP_KEYS)}; "
                                              f"expected {', '.join(GROUP_KEYS)}")
            if key == "hosts":
                for host_key, host_key_node, host_node in self.doc.mapping(value, f"group {name!r}: hosts"):
                    for host in expand_host_range(self.doc, host_key, host_key_node):
                        self._host(host, host_key_node, host_node, group)
            elif key == "vars":
                group.vars.update(self._vars(value, f"group {name!r}: vars"))
            else:
                for child, child_key, child_node in self.doc.mapping(value, f"group {name!r}: children"):
                    self._group(child, child_key, child_node, parent=name)

    def _ensure(self, name: str, node: yaml.Node) -> Group:
        return self.groups.setdefault(name, Group(name, line_of(node)))

    def _host(self, written: str, key_node: yaml.Node, node: yaml.Node, group: Group) -> None:
        host, _, port = written.rpartition(":") if _HOST_PORT.match(written) else (written, "", "")
        self.host_lines.setdefault(host, line_of(key_node))
        self.host_vars.setdefault(host, {}).update(self._vars(node, f"host {host!r}"))
        if port:   # `name:port` as a host key, which Ansible accepts too
            if not 0 < int(port) <= MAX_PORT:
                raise self.doc.error(key_node, f"host {host!r}: port {port} is out of range (1-{MAX_PORT})")
            self.host_vars[host].setdefault("ansible_port", int(port))
        if host not in group.hosts:
            group.hosts.append(host)

    def _vars(self, node: yaml.Node, what: str) -> dict[str, Any]:
        return {key: self._var(key, value, what) for key, _, value in self.doc.mapping(node, what)}

    def _var(self, key: str, node: yaml.Node, what: str) -> Any:
        doc, target = self.doc, FIELDS.get(key)
        if target is None:
            return doc.value(node)
        if target == "port":
            return doc.port(node, f"{what}: {key}", allow_digit_string=True)
        value = doc.string(node, f"{what}: {key}")
        if value is None:
            return None
        if key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
            return _proxy_jump_from_args(doc, node, value)   # other ssh options do not concern gpudiag
        if "{{" in value:
            raise doc.error(node, f"{what}: {key} is a Jinja template, which gpudiag does not evaluate")
        if key == "ansible_connection":
            if value not in LOCAL_CONNECTIONS + SSH_CONNECTIONS:
                raise doc.error(node, f"{what}: ansible_connection {value!r} is not supported (local or ssh)")
            return value in LOCAL_CONNECTIONS
        if key == "ansible_python_interpreter" and value.startswith("auto"):
            return None   # Ansible's interpreter discovery; gpudiag's default applies
        if target == "container":
            try:
                parse_container(value)
            except ValueError as exc:
                raise doc.error(node, f"{what}: {exc}") from None
        return value

    def _check_cycles(self) -> None:
        done: set[str] = set()

        def visit(name: str, stack: tuple[str, ...]) -> None:
            for child in self.groups[name].children:
                if child in stack:
                    cycle = " → ".join(stack[stack.index(child):] + (child,))
                    raise self.doc.error_at(self.groups[child].line, f"groups form a cycle: {cycle}")
                if child not in done:
                    visit(child, stack + (child,))
            done.add(name)

        for name in list(self.groups):   # from `all` first, then any group not reachable from it
            if name not in done:
                visit(name, (name,))

    def _fill_ungrouped(self) -> None:
        grouped = {h for name, g in self.groups.items() if name not in ("all", "ungrouped") for h in g.hosts}
        ungrouped = [h for h in self.host_vars if h not in grouped]
        if ungrouped or "ungrouped" in self.groups:
            group = self.groups.setdefault("ungrouped", Group("ungrouped", 1, parents=["all"]))
            group.hosts += [h for h in ungrouped if h not in group.hosts]
            if "ungrouped" not in self.groups["all"].children:
                self.groups["all"].children.append("ungrouped")

    def _hosts_of(self, name: str) -> list[str]:
        if name not in self.flat:
            members = list(self.host_vars) if name == "all" else self.groups[name].hosts + \
                [h for child in self.groups[name].children for h in self._hosts_of(child)]
            self.flat[name] = list(dict.fromkeys(members))
        return self.flat[name]

    def _depth(self, name: str) -> int:
        if name not in self._depths:
            parents = self.groups[name].parents
            self._depths[name] = 0 if name == "all" or not parents else 1 + max(self._depth(p) for p in parents)
        return self._depths[name]

    def _spec(self, host: str, containing: list[str]) -> HostSpec:
        """The host's record: vars of `all`, then shallower before deeper groups (ties by name), then its own."""
        merged: dict[str, Any] = {}
        for group in sorted(containing, key=lambda g: (self._depth(g), g)):
            merged.update(self.groups[group].vars)
        merged.update(self.host_vars[host])
        spec = HostSpec(name=host, line=self.host_lines[host],
                        groups=sorted(g for g in containing if g != "all"))
        for key, value in merged.items():
            target = FIELDS.get(key)
            if target is None:
                spec.vars[key] = value
            elif value is not None:
                setattr(spec, target, value)
        return spec


def _proxy_jump_from_args(doc: YamlFile, node: yaml.Node, args: str) -> str | None:
    """The ProxyJump inside ansible_ssh_common_args (`-J hop` or `-o ProxyJump=hop`), if any."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise doc.error(node, f"ssh arguments {args!r}: {exc}") from None
    for i, word in enumerate(words):
        joined = word + words[i + 1] if word in ("-J", "-o") and i + 1 < len(words) else word
        match = _PROXY_JUMP.match(joined.replace(" ", ""))
        if match:
            jump = (match.group("short") or match.group("long") or "").strip()
            if "{{" in jump:
                raise doc.error(node, f"ProxyJump {jump!r} is a Jinja template, which gpudiag does not evaluate")
            return jump or None
    return None


def parse_ansible(doc: YamlFile) -> tuple[list[HostSpec], dict[str, list[str]]]:
    return AnsibleReader(doc).read()
