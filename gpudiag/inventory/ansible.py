"""Ansible's inventory (YAML form, or INI read into the same tree), read as Ansible reads it: `all:` with
`hosts` / `vars` / `children` (recursive), group vars inherited (child groups over parents, host vars
over groups), `ungrouped`. A setting gpudiag cannot honour is recorded on the host, never raised: a
host nobody targets never blocks the command."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpudiag.inventory.base import (
    MAX_PORT,
    HostSpec,
    InventoryError,
    Unhonoured,
    YamlFile,
    expand_host_range,
    line_of,
    suggest,
)
from gpudiag.transports.container import parse_container

GROUP_KEYS = ("hosts", "vars", "children")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh")
# ansible_connection plugins that exec into a container from this machine → gpudiag's container engine
CONTAINER_CONNECTIONS = {
    "docker": "docker",
    "community.docker.docker": "docker",
    "podman": "podman",
    "containers.podman.podman": "podman",
    "kubectl": "kubectl",
    "kubernetes.core.kubectl": "kubectl",
    "community.kubernetes.kubectl": "kubectl",
}
# set but not honoured: gpudiag runs as the login user and authenticates with keys and the agent
_NO_BECOME = "gpudiag does not escalate privileges; the probes run as the login user"
_NO_PASSWORD = "gpudiag does not log in with passwords; it uses keys and the ssh agent"
WARN_ONLY = {
    "ansible_become": _NO_BECOME,
    "ansible_ssh_pass": _NO_PASSWORD,
    "ansible_password": _NO_PASSWORD,
    "ansible_ssh_password": _NO_PASSWORD,
}
SECRET_KEYS = ("pass", "password", "secret", "token")
# inventory variable → HostSpec field
FIELDS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_private_key_file": "identity_file",
    "ansible_python_interpreter": "python",
    "ansible_connection": "connection",
    "ansible_ssh_common_args": "jump",
    "ansible_ssh_extra_args": "jump",
    "gpudiag_container": "container",
    "gpudiag_jump": "jump",
    "gpudiag_server_log": "server_log",
}
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
                raise self.doc.error(
                    sub_key,
                    f"group {name!r}: unknown key {key!r}{suggest(key, GROUP_KEYS)}; expected {', '.join(GROUP_KEYS)}",
                )
            if key == "hosts":
                for host_key, host_key_node, host_node in self.doc.mapping(value, f"group {name!r}: hosts"):
                    for host in expand_host_range(self.doc, host_key, host_key_node):
                        self._host(host, host_key_node, host_node, group)
            elif key == "vars":
                group.vars.update(self._vars(value, f"group {name!r}: vars"))
            else:
                for child, child_key, child_node in self.doc.mapping(value, f"group {name!r}: children"):
                    self._group(child, child_key, child_node, parent=name)

    def _ensure(self, name: str, node: yaml.Node | None) -> Group:
        return self.groups.setdefault(name, Group(name, line_of(node)))

    def _host(self, written: str, key_node: yaml.Node, node: yaml.Node, group: Group) -> None:
        host, _, port = written.rpartition(":") if _HOST_PORT.match(written) else (written, "", "")
        self.host_lines.setdefault(host, line_of(key_node))
        self.host_vars.setdefault(host, {}).update(self._vars(node, f"host {host!r}"))
        if port:  # `name:port` as a host key, which Ansible accepts too
            if not 0 < int(port) <= MAX_PORT:
                raise self.doc.error(key_node, f"host {host!r}: port {port} is out of range (1-{MAX_PORT})")
            self.host_vars[host].setdefault("ansible_port", int(port))
        if host not in group.hosts:
            group.hosts.append(host)

    def _vars(self, node: yaml.Node, what: str) -> dict[str, Any]:
        return {key: self._var(key, value, what) for key, _, value in self.doc.mapping(node, what)}

    def _var(self, key: str, node: yaml.Node, what: str) -> Any:
        """The value as gpudiag uses it, or an Unhonoured record (kept with the host, warned about or
        skipped only if the host is targeted)."""
        try:
            return self._checked_var(key, node, what)
        except InventoryError as exc:
            return Unhonoured(key, str(exc), blocking=True, field=FIELDS.get(key, ""))

    def _checked_var(self, key: str, node: yaml.Node, what: str) -> Any:
        doc, target = self.doc, FIELDS.get(key)
        where = f"{doc.path}:{line_of(node)}"
        if key in WARN_ONLY:
            value = doc.value(node)
            if value in (None, False, "", "no", "false", "False"):
                return None
            return Unhonoured(key, f"{where}: {key} is set but not honoured: {WARN_ONLY[key]}", blocking=False)
        if target is None:
            if any(word in key.lower() for word in SECRET_KEYS):
                return None  # a secret gpudiag has no use for is never kept
            return doc.value(node)
        if target == "port":
            return doc.port(node, f"{what}: {key}", allow_digit_string=True)
        value = doc.string(node, f"{what}: {key}")
        if value is None:
            return None
        if key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
            return _proxy_jump_from_args(doc, node, value)  # other ssh options do not concern gpudiag
        if "{{" in value or "{%" in value:
            return Unhonoured(
                key,
                f"{where}: {key} is a Jinja template ({_short(value)}), which gpudiag does not evaluate",
                blocking=True,
                field=target,
            )
        if key == "ansible_connection":
            if value in LOCAL_CONNECTIONS + SSH_CONNECTIONS or value in CONTAINER_CONNECTIONS:
                return value
            return Unhonoured(
                key,
                f"{where}: ansible_connection {value!r} is not supported (local, ssh, docker, podman or kubectl)",
                blocking=True,
                field="connection",
            )
        if key == "ansible_python_interpreter" and value.startswith("auto"):
            return None  # Ansible's interpreter discovery; gpudiag's default applies
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
                    cycle = " → ".join(stack[stack.index(child) :] + (child,))
                    raise self.doc.error_at(self.groups[child].line, f"groups form a cycle: {cycle}")
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
                self.groups["all"].children.append("ungrouped")

    def _hosts_of(self, name: str) -> list[str]:
        if name not in self.flat:
            members = (
                list(self.host_vars)
                if name == "all"
                else self.groups[name].hosts
                + [h for child in self.groups[name].children for h in self._hosts_of(child)]
            )
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
        spec = HostSpec(name=host, line=self.host_lines[host], groups=sorted(g for g in containing if g != "all"))
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


def _short(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


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
