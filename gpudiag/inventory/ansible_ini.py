"""Ansible's INI inventory form, read as Ansible's ini plugin reads it: `[group]` host lines with inline
`key=value` vars, `[group:vars]`, `[group:children]`, hosts before any section in `ungrouped`,
`host:port`, ranges, `#`/`;` comments, values parsed as Python literals where they parse.

The file becomes the same node tree as the YAML form (each node keeps its INI line), so one reader
applies Ansible's rules to both."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any, Sequence

import yaml
from yaml.constructor import SafeConstructor

from gpudiag.inventory.base import InventoryError, YamlFile

_SECTION = re.compile(r"^\[(?P<name>[^\]:]+)(?::(?P<kind>\w+))?\]\s*(?:[#;].*)?$")
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"


def looks_like_ini(text: str) -> bool:
    """The first meaningful line is a `[section]` or a host line (`gpu-01`, `gpu-01:2222 k=v`): no YAML
    `key:` mapping, list item or flow collection."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if _SECTION.match(line):
            return True
        return not line.startswith(("-", "{", "[", "%", "!", "&", "*", "'", '"')) and not re.search(r":(\s|$)", line)
    return False


class IniFile(YamlFile):
    """An INI inventory as YamlFile's node tree: all → children → group → hosts / vars / children."""

    def __init__(self, path: str | Path, text: str):  # super().__init__ reads YAML; not wanted here
        self.path = str(path)
        self._constructor = SafeConstructor()
        self._groups: dict[str, dict[str, Any]] = {}
        self._parse(text)
        self.root = self._tree()

    def _group(self, name: str, line: int) -> dict[str, Any]:
        return self._groups.setdefault(name, {"line": line, "hosts": {}, "vars": {}, "children": {}})

    def _parse(self, text: str) -> None:
        group, kind = "ungrouped", "hosts"
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            section = _SECTION.match(line)
            if section:
                group, kind = section.group("name").strip(), section.group("kind") or "hosts"
                if kind not in ("hosts", "vars", "children"):
                    raise self.error_at(
                        number, f"section [{group}:{kind}]: expected [{group}], [{group}:vars] or [{group}:children]"
                    )
                self._group(group, number)
                continue
            if line.startswith("["):
                raise self.error_at(number, f"cannot read section header {line[:80]!r}")
            if kind == "vars":
                key, eq, value = line.partition("=")
                if not eq or not key.strip():
                    raise self.error_at(number, f"[{group}:vars]: expected key=value, not {line[:80]!r}")
                self._group(group, number)["vars"][key.strip()] = (_value(value.strip()), number)
            elif kind == "children":
                child = line.split()[0]
                self._group(child, number)
                self._group(group, number)["children"][child] = number
            else:
                self._host_line(group, line, number)

    def _host_line(self, group: str, line: str, number: int) -> None:
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise self.error_at(number, f"cannot read host line: {exc}") from None
        if not words:
            return
        host_vars: dict[str, tuple[Any, int]] = {}
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if not eq or not key:
                raise self.error_at(number, f"host {words[0]!r}: expected key=value, not {word!r}")
            host_vars[key] = (_value(value), number)
        hosts = self._group(group, number)["hosts"]
        entry = hosts.setdefault(words[0], (number, {}))
        entry[1].update(host_vars)

    def _tree(self) -> yaml.MappingNode:
        """{all: {vars, children: {group: {hosts, vars, children: {child: {}}}}}} as nodes."""
        groups = []
        for name, group in self._groups.items():
            if name == "all":
                continue
            groups.append((_key(name, group["line"]), self._group_node(group, with_children=True)))
        body = [(_key("children", 1), _mapping(groups, 1))]
        top = self._groups.get("all")
        if top:  # [all:vars] and hosts under [all]
            body += self._group_node(top, with_children=False).value
        return _mapping([(_key("all", 1), _mapping(body, 1))], 1)

    def _group_node(self, group: dict[str, Any], with_children: bool) -> yaml.MappingNode:
        line = group["line"]
        items = [
            (_key("hosts", line), self._hosts_node(group["hosts"], line)),
            (
                _key("vars", line),
                _mapping([(_key(k, v[1]), _scalar(v[0], v[1])) for k, v in group["vars"].items()], line),
            ),
        ]
        if with_children:
            # A child listed here is declared again under its parent; its own section fills it.
            children = [(_key(child, at), _mapping([], at)) for child, at in group["children"].items()]
            items.append((_key("children", line), _mapping(children, line)))
        return _mapping(items, line)

    def _hosts_node(self, hosts: dict[str, tuple[int, dict[str, Any]]], line: int) -> yaml.MappingNode:
        return _mapping(
            [
                (_key(name, at), _mapping([(_key(k, v[1]), _scalar(v[0], v[1])) for k, v in host_vars.items()], at))
                for name, (at, host_vars) in hosts.items()
            ],
            line,
        )


def read_ini(path: str | Path, text: str) -> IniFile:
    try:
        return IniFile(path, text)
    except InventoryError:
        raise
    except (ValueError, RecursionError) as exc:
        raise InventoryError(f"{path}:1: cannot read INI inventory: {exc}") from None


def _value(text: str) -> Any:
    """As Ansible's ini plugin: a Python literal when it parses as one, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text


def _mark(line: int) -> yaml.Mark:
    return yaml.Mark("inventory", 0, line - 1, 0, None, 0)  # no buffer to quote


def _key(name: str, line: int) -> yaml.ScalarNode:
    return yaml.ScalarNode(_STR, name, start_mark=_mark(line), end_mark=_mark(line))


def _mapping(items: Sequence[tuple[yaml.Node, yaml.Node]], line: int) -> yaml.MappingNode:
    return yaml.MappingNode(_MAP, list(items), start_mark=_mark(line), end_mark=_mark(line))


def _scalar(value: Any, line: int) -> yaml.Node:
    """A value as the node YAML would have made for it, marked with its INI line."""
    node = yaml.SafeDumper(None).represent_data(value)  # type: ignore[arg-type]
    for sub in _walk(node):
        sub.start_mark = sub.end_mark = _mark(line)
    return node


def _walk(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [node] + [n for k, v in node.value for n in _walk(k) + _walk(v)]
    if isinstance(node, yaml.SequenceNode):
        return [node] + [n for item in node.value for n in _walk(item)]
    return [node]
