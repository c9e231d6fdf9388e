"""ssh config files read as OpenSSH reads them: one keyword and its arguments a line (`Key value`,
`Key=value`, double or single quotes, `#` comments), and `Include` expanded into the files it names
(globs in lexical order, `~`, paths relative to ~/.ssh). Evaluation lives in sshconfig.py."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# OpenSSH's READCONF_MAX_DEPTH: deeper Include chains are refused, as ssh itself refuses them.
MAX_INCLUDE_DEPTH = 16
_KEYWORD = re.compile(r"^\s*(?P<key>[A-Za-z][A-Za-z0-9]*)\s*(?:=\s*|\s+|$)(?P<rest>.*)$")


class SshConfigError(ValueError):
    """The ssh config cannot be read; one line, naming the file (and line where there is one)."""


@dataclass
class Directive:
    keyword: str  # lower case, as OpenSSH compares them
    args: list[str]
    file: str
    line: int
    included: list["ConfigFile"] = field(default_factory=list)  # Include only: the files it names

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class ConfigFile:
    path: str
    directives: list[Directive]


def read_config(path: str | Path, relative_to: Path | None = None) -> ConfigFile:
    """The file and everything it includes; a missing top-level file is an empty config. Relative Include
    paths are under `relative_to`: ~/.ssh for a user's config (the default), /etc/ssh for the system's."""
    path = Path(path)
    if not path.exists():
        return ConfigFile(str(path), [])
    return _read(path, depth=0, base=relative_to)


def parse_text(text: str, name: str = "<text>") -> ConfigFile:
    return ConfigFile(name, _directives(text, name, depth=0))


def _read(path: Path, depth: int, base: Path | None = None) -> ConfigFile:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SshConfigError(f"{path}: cannot read ssh config: {' '.join(str(exc).split())}") from None
    return ConfigFile(str(path), _directives(text, str(path), depth, base))


def _directives(text: str, name: str, depth: int, base: Path | None = None) -> list[Directive]:
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _KEYWORD.match(raw)
        if not match:
            raise SshConfigError(f"{name}:{number}: cannot read ssh config line {stripped[:80]!r}")
        args = split_args(match.group("rest"), f"{name}:{number}")
        directive = Directive(match.group("key").lower(), args, name, number)
        if not args:  # OpenSSH refuses a keyword without a value
            raise SshConfigError(f"{name}:{number}: cannot read ssh config: {match.group('key')} has no value")
        if directive.keyword == "include":
            directive.included = _include(directive, depth, base)
        out.append(directive)
    return out


def split_args(text: str, where: str) -> list[str]:
    """Words as OpenSSH's argv_split makes them: quotes group, backslash escapes, `#` starts a comment."""
    words: list[str] = []
    word, quote, in_word, i = "", "", False, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text) and text[i + 1] in (quote, "\\"):
                word, i = word + text[i + 1], i + 2
                continue
            if c == quote:
                quote = ""
            else:
                word += c
        elif c in " \t":
            if in_word:
                words.append(word)
            word, in_word = "", False
        elif c == "#" and not in_word:
            break
        elif c in "\"'":
            quote, in_word = c, True
        elif c == "\\" and i + 1 < len(text):
            word, in_word, i = word + text[i + 1], True, i + 2
            continue
        else:
            word, in_word = word + c, True
        i += 1
    if quote:
        raise SshConfigError(f"{where}: unterminated quote in ssh config")
    if in_word:
        words.append(word)
    return words


def _include(directive: Directive, depth: int, base: Path | None) -> list[ConfigFile]:
    if depth + 1 > MAX_INCLUDE_DEPTH:
        raise SshConfigError(f"{directive.where}: Include nested more than {MAX_INCLUDE_DEPTH} deep")
    if not directive.args:
        raise SshConfigError(f"{directive.where}: Include needs a file name")
    files = []
    for pattern in directive.args:
        # A user config's relative paths are under ~/.ssh (OpenSSH applies this to -F files too).
        expanded = os.path.expanduser(pattern)
        if not os.path.isabs(expanded):
            expanded = str((base or Path.home() / ".ssh") / expanded)
        for found in sorted(glob.glob(expanded)):  # glob(3) order: lexical; no match is no error
            if os.path.isdir(found):
                continue
            files.append(_read(Path(found), depth + 1, base))
    return files
