"""gpudiag's own inventory form: `defaults:`, `hosts:` (name → settings) and `groups:` (name → hosts
or other groups, nested). A host entry that cannot be read is that host's problem (it is skipped with
file:line when targeted), never the other hosts'; an error in the file's shape stops the load."""

from __future__ import annotations

import yaml

from gpudiag.inventory.patterns import expand_host_range
from gpudiag.inventory.base import (
    HostSpec,
    InventoryError,
    Unhonoured,
    YamlFile,
    line_of,
    suggest,
)
from gpudiag.transports.container import parse_container

TOP_KEYS = ("defaults", "hosts", "groups")
SETTINGS = ("user", "port", "identity_file", "python", "container", "jump", "server_log")
HOST_KEYS = ("address",) + SETTINGS + ("groups",)


def parse_native(doc: YamlFile) -> tuple[list[HostSpec], dict[str, list[str]]]:
    """→ (host records with defaults applied, group → member host names in file order)."""
    top = {key: (key_node, value) for key, key_node, value in doc.mapping(doc.root, "the inventory", False)}
    for key, (key_node, _) in top.items():
        if key not in TOP_KEYS:
            hint = " (an Ansible inventory starts with `all:`)" if key in ("children", "vars") else ""
            raise doc.error(
                key_node, f"unknown top-level key {key!r}{suggest(key, TOP_KEYS)}{hint}; expected {', '.join(TOP_KEYS)}"
            )
    if "hosts" not in top:
        raise doc.error(doc.root, "no `hosts:` section (nor Ansible's `all:`)")
    defaults = _settings(doc, top["defaults"][1], "defaults", SETTINGS) if "defaults" in top else {}
    specs, group_refs = [], {}
    for written, key_node, value in doc.mapping(top["hosts"][1], "hosts"):
        for name in expand_host_range(doc, written, key_node):
            if name in group_refs:
                raise doc.error(key_node, f"host {name!r} is defined twice")
            try:
                spec, group_refs[name] = _host_spec(doc, name, key_node, value, defaults)
            except InventoryError as exc:
                spec = HostSpec(name=name, line=line_of(key_node), problems=[Unhonoured("", str(exc), blocking=True)])
                group_refs[name] = _own_groups(doc, value, name)
            specs.append(spec)
    members = _group_members(doc, top["groups"][1] if "groups" in top else None, group_refs)
    groups = flatten_groups(doc, members, {s.name for s in specs})
    _attach_groups(specs, groups)
    return specs, groups


def _settings(doc: YamlFile, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, key_node, value in doc.mapping(node, what):
        if key not in allowed:
            raise doc.error(
                key_node, f"{what}: unknown key {key!r}{suggest(key, allowed)}; expected {', '.join(allowed)}"
            )
        if key == "port":
            out[key] = doc.port(value, f"{what}: port")
        elif key == "groups":
            out[key] = doc.names(value, f"{what}: groups")
        else:
            out[key] = doc.string(value, f"{what}: {key}")
            if key == "container" and out[key] is not None:
                _check_container(doc, value, what, str(out[key]))
    return out


def _check_container(doc: YamlFile, node: yaml.Node, what: str, spec: str) -> None:
    if ":" not in spec:
        raise doc.error(node, f"{what}: container {spec!r} must be docker:NAME, podman:NAME or kubectl:[NAMESPACE/]POD")
    try:
        parse_container(spec)
    except ValueError as exc:
        raise doc.error(node, f"{what}: {exc}") from None


def _host_spec(
    doc: YamlFile, name: str, key_node: yaml.Node, node: yaml.Node, defaults: dict[str, object]
) -> tuple[HostSpec, list[tuple[str, yaml.Node]]]:
    """The host's record (its own values over the defaults) and the groups it names itself."""
    values = _settings(doc, node, f"host {name!r}", HOST_KEYS)
    merged = {k: v for k, v in defaults.items() if v is not None}
    merged.update({k: v for k, v in values.items() if v is not None and k != "groups"})
    spec = HostSpec(name=name, line=line_of(key_node), **merged)  # type: ignore[arg-type]
    return spec, values.get("groups") or []  # type: ignore[return-value]


def _own_groups(doc: YamlFile, node: yaml.Node, name: str) -> list[tuple[str, yaml.Node]]:
    """The groups an unreadable host entry names, where that part of it can be read."""
    try:
        entries = doc.mapping(node, f"host {name!r}")
        return next((doc.names(value, "groups") for key, _, value in entries if key == "groups"), [])
    except InventoryError:
        return []


def _group_members(
    doc: YamlFile, node: yaml.Node | None, group_refs: dict[str, list[tuple[str, yaml.Node]]]
) -> dict[str, list[tuple[str, yaml.Node]]]:
    """Group → its members as written; a host's own `groups:` list adds it to those groups."""
    members: dict[str, list[tuple[str, yaml.Node]]] = {}
    host_names = set(group_refs)
    for group, key_node, value in doc.mapping(node, "groups"):
        _check_group_name(doc, key_node, group, host_names)
        members[group] = doc.names(value, f"group {group!r}")
    for host, refs in group_refs.items():
        for group, ref_node in refs:
            _check_group_name(doc, ref_node, group, host_names)
            members.setdefault(group, []).append((host, ref_node))
    return members


def _check_group_name(doc: YamlFile, node: yaml.Node, group: str, host_names: set[str]) -> None:
    if group == "all":
        raise doc.error(node, "group name 'all' is reserved (it selects every host)")
    if group in host_names:
        raise doc.error(node, f"{group!r} is both a host and a group; rename one")


def flatten_groups(
    doc: YamlFile, members: dict[str, list[tuple[str, yaml.Node]]], hosts: set[str]
) -> dict[str, list[str]]:
    """Each group → the hosts it holds, nested groups expanded; unknown names and cycles refused."""
    flat: dict[str, list[str]] = {}

    def expand(group: str, stack: tuple[str, ...]) -> list[str]:
        if group in flat:
            return flat[group]
        out: list[str] = []
        for name, node in members[group]:
            if name in members:
                if name in stack:
                    cycle = " → ".join(stack[stack.index(name) :] + (name,))
                    raise doc.error(node, f"groups form a cycle: {cycle}")
                found = expand(name, stack + (name,))
            elif name in hosts:
                found = [name]
            else:
                raise doc.error(
                    node,
                    f"group {group!r} names unknown host or group {name!r}{suggest(name, list(hosts) + list(members))}",
                )
            out += [h for h in found if h not in out]
        flat[group] = out
        return out

    for group in members:
        expand(group, (group,))
    return flat


def _attach_groups(specs: list[HostSpec], groups: dict[str, list[str]]) -> None:
    members = {group: set(hosts) for group, hosts in groups.items()}
    for spec in specs:
        spec.groups = sorted(g for g, hosts in members.items() if spec.name in hosts)
