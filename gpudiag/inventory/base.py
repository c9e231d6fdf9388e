"""Shared pieces of inventory parsing: the error type, the raw host record, and YAML node readers
that keep line numbers (every error names file:line)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from gpudiag.models import Host

LOCAL_NAMES = ("localhost", "local")
MAX_PORT = 65535
MAX_RANGE = 4096


class InventoryError(ValueError):
    """Bad inventory or target; the message is one line, with file:line where there is a file."""


@dataclass
class Inventory:
    path: str | None = None
    hosts: Mapping[str, Host] = field(default_factory=dict)  # name as written → resolved Host
    groups: dict[str, list[str]] = field(default_factory=dict)  # group → host names (flattened, ordered)
    form: str = "gpudiag"  # gpudiag | ansible
    notes: dict[str, list[str]] = field(default_factory=dict)  # host name → settings not honoured (warn)
    python_skips: set[str] = field(default_factory=set)  # skipped only for their interpreter setting
    skipped_sources: list[str] = field(default_factory=list)  # "FILE: why" for sources not read (warn)


@dataclass(frozen=True)
class Unhonoured:
    """A setting gpudiag cannot honour, found on a host or one of its groups. `blocking`: the host
    cannot be reached correctly without it, so it is skipped (when targeted) with this reason."""

    key: str
    reason: str  # "FILE:LINE: ..." one line, never the value of a secret
    blocking: bool
    field: str = ""  # the host field it would have set ("python": --python makes it moot)


@dataclass
class HostSpec:
    """One host as written in a file, before defaults, ssh_config and jump names are resolved."""

    name: str
    line: int
    path: str | None = None  # the file it is written in, where an inventory has several
    address: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    python: str | None = None
    container: str | None = None
    jump: str | None = None
    server_log: str | None = None  # where the server's log is: a path, journal:UNIT or docker:NAME
    local: bool | None = None  # forced by ansible_connection; None: decided by name/address
    connection: str | None = None  # ansible_connection when it names a container engine
    problems: list[Unhonoured] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)


def add_unique(by_name: dict[str, Host], host: Host) -> None:
    """Adds the host under its name, or `NAME-2`, `NAME-3` when a different host holds the name."""
    name, n = host.name, 2
    while name in by_name:
        if by_name[name] == host.with_(name=name):
            return  # the same host, selected again
        name, n = f"{host.name}-{n}", n + 1
    by_name[name] = host.with_(name=name)


def suggest(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """' (did you mean X?)' when a known word is close, else ''; best first, ties in name order."""
    scored = []
    for name in set(known):
        ratio = difflib.SequenceMatcher(None, word, name).ratio()
        if ratio >= cutoff:
            scored.append((-ratio, name))
    close = [name for _, name in sorted(scored)[:3]]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


class YamlFile:
    """A composed YAML document and the readers that turn its nodes into checked values."""

    def __init__(self, path: str | Path, text: str | None = None):
        """The file at `path`, or `text` given (a program's answer), named `path` in errors."""
        self.path = str(path)
        self._constructor = SafeConstructor()
        try:
            text = Path(path).read_text(encoding="utf-8") if text is None else text
        except FileNotFoundError:
            raise InventoryError(f"{self.path}: inventory file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InventoryError(f"{self.path}: cannot read inventory: {exc}") from None
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = min(mark.line + 1, len(text.splitlines()) or 1) if mark else 1  # EOF errors: the last line
            problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
            raise InventoryError(f"{self.path}:{line}: YAML syntax error: {problem}") from None
        except yaml.YAMLError as exc:
            raise InventoryError(f"{self.path}:1: YAML error: {' '.join(str(exc).split())}") from None
        if self.root is not None and _is_null(self.root):
            self.root = None  # `---` and comments only, as Ansible reads it: an empty document
        if self.root is not None and not isinstance(self.root, yaml.MappingNode):
            raise self.error(self.root, f"the inventory must be a mapping, not {kind_of(self.root)}")

    def error(self, node: yaml.Node | None, message: str) -> InventoryError:
        return InventoryError(f"{self.path}:{line_of(node)}: {message}")

    def error_at(self, line: int, message: str) -> InventoryError:
        return InventoryError(f"{self.path}:{line}: {message}")

    def mapping(
        self, node: yaml.Node | None, what: str, allow_null: bool = True
    ) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """(key, key node, value node) for each entry; merge keys (<<) applied; duplicate keys refused."""
        if node is None or (allow_null and _is_null(node)):
            return []
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping, not {kind_of(node)}")
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self._key(key_node, what)
            if key in seen:
                raise self.error(key_node, f"{what}: duplicate key {key!r} (first at line {seen[key]})")
            seen[key] = line_of(key_node)
        try:
            self._constructor.flatten_mapping(node)
        except ConstructorError as exc:
            raise self.error(node, f"{what}: bad merge key: {exc.problem}") from None
        entries: dict[str, tuple[str, yaml.Node, yaml.Node]] = {}
        for key_node, value_node in node.value:  # merged entries come first; later ones override
            key = self._key(key_node, what)
            entries[key] = (key, key_node, value_node)
        return list(entries.values())

    def _key(self, node: yaml.Node, what: str) -> str:
        value = self.value(node)
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            raise self.error(node, f"{what}: key {node.value!r} must be a name")
        if not str(value).strip():
            raise self.error(node, f"{what}: empty name")
        return str(value)

    def value(self, node: yaml.Node) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except ConstructorError as exc:
            raise self.error(node, f"cannot read value: {exc.problem}") from None

    def string(self, node: yaml.Node, what: str) -> str | None:
        """A string value kept verbatim (no stripping, no splitting); null → None."""
        if _is_null(node):
            return None
        value = self.value(node)
        if not isinstance(value, str):
            raise self.error(node, f"{what} must be a string, not {kind_of(node)} (quote it)")
        if not value.strip():
            raise self.error(node, f"{what} is empty")
        return value

    def port(self, node: yaml.Node, what: str, allow_digit_string: bool = False) -> int | None:
        if _is_null(node):
            return None
        value = self.value(node)
        if allow_digit_string and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, f"{what} must be an integer, not {kind_of(node)} {node.value!r}")
        if not 0 < value <= MAX_PORT:
            raise self.error(node, f"{what} {value} is out of range (1-{MAX_PORT})")
        return value

    def names(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node]]:
        """A list of names (a single string is a one-item list); null → []."""
        if _is_null(node):
            return []
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        if not isinstance(node, (yaml.SequenceNode, yaml.ScalarNode)):
            raise self.error(node, f"{what} must be a list of names, not {kind_of(node)}")
        out = []
        for item in items:
            name = self.string(item, f"{what} entry") if isinstance(item, yaml.ScalarNode) else None
            if name is None:
                raise self.error(item, f"{what}: each entry must be a name, not {kind_of(item)}")
            out.append((name, item))
        return out


def line_of(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None and node.start_mark is not None else 1


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def kind_of(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {
        "tag:yaml.org,2002:int": "an integer",
        "tag:yaml.org,2002:float": "a number",
        "tag:yaml.org,2002:bool": "a boolean",
        "tag:yaml.org,2002:null": "null",
        "tag:yaml.org,2002:str": "a string",
    }.get(node.tag, "a scalar")
