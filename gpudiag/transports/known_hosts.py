"""known_hosts lines read as OpenSSH reads them (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT", hostfile.c).

Fields are separated by any run of spaces or tabs: an optional marker (`@revoked`, `@cert-authority`),
comma-separated host patterns (plain, wildcard, `!negated`, `[host]:port`, hashed `|1|salt|hash`), the key
type, the base64 key and an optional comment. Blank lines and `#` comments are skipped. A line gpudiag
cannot read is never skipped in silence: it is an `Unreadable` naming file:line, warned about once, and,
when its host field names the host being checked, it stops --accept-new from recording a key.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeys
from paramiko.pkey import UnknownKeyType

MARKERS = {"@revoked": "revoked", "@cert-authority": "cert-authority"}
_warned: set[str] = set()
_warn_lock = threading.Lock()


@dataclass(frozen=True)
class KnownKey:
    key: paramiko.PKey
    file: Path
    line: int
    marker: str | None = None  # None, "revoked" or "cert-authority"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Unreadable:
    """A line that names hosts (maybe this one) with a key gpudiag cannot read, and why."""

    file: Path
    line: int
    patterns: tuple[str, ...]
    why: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def matches(patterns: list[str] | tuple[str, ...], name: str) -> bool:
    """OpenSSH host patterns: hashed `|1|salt|hash`, wildcards, and `!negation`."""
    hit = False
    for pattern in patterns:
        if pattern.startswith("|1|"):
            if _hashed_match(pattern, name):
                hit = True
        elif pattern.startswith("!"):
            if _wildcard_match(pattern[1:], name):
                return False
        elif _wildcard_match(pattern, name):
            hit = True
    return hit


def _hashed_match(pattern: str, name: str) -> bool:
    try:
        return HostKeys.hash_host(name, pattern) == pattern
    except (binascii.Error, ValueError, IndexError):  # a broken salt matches nothing, as in OpenSSH
        return False


def _wildcard_match(pattern: str, name: str) -> bool:
    """OpenSSH wildcards are only `*` and `?`; `[host]:port` brackets are literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.IGNORECASE) is not None


def parse_line(text: str, path: Path, number: int) -> tuple[tuple[str, ...], KnownKey] | Unreadable | None:
    """One line: None for a blank or comment line, else its host patterns and key, or why it cannot be read."""
    text = text.lstrip(" \t")
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None
    marker = None
    if text.startswith("@"):
        # hostfile.c check_markers: the marker ends at the line's first space, or its first tab only when
        # it has no space; so "@revoked<TAB>host key" with spaces later is an invalid marker, ignored.
        end = text.find(" ") if " " in text else text.find("\t")
        word = text[:end] if end > 0 else text
        if word not in MARKERS:
            return Unreadable(
                path,
                number,
                tuple(_patterns(fields[1:2])),
                f"invalid marker {word[:40]!r} (OpenSSH ignores the line too)",
            )
        marker, fields = MARKERS[word], text[end:].split()
    if len(fields) < 3:
        # no key on it, so none it could hold for a host: warned about, names no host
        return Unreadable(path, number, (), "fewer fields than host, key type and key")
    patterns, key_type, blob = tuple(_patterns(fields[:1])), fields[1], fields[2]
    if key_type.isdigit():  # SSH protocol 1 "bits exponent modulus": OpenSSH no longer reads these either
        return Unreadable(path, number, patterns, "an SSH-1 RSA key")
    try:
        key = paramiko.PKey.from_type_string(key_type, base64.b64decode(blob, validate=True))
    except (binascii.Error, ValueError):
        return Unreadable(path, number, patterns, "the key is not valid base64")
    except UnknownKeyType:
        return Unreadable(path, number, patterns, f"key type {key_type[:60]} is not one gpudiag can check")
    except Exception as exc:  # a truncated or inconsistent key blob: paramiko raises several kinds
        return Unreadable(path, number, patterns, f"the {key_type[:60]} key cannot be read ({type(exc).__name__})")
    return patterns, KnownKey(key, path, number, marker)


def _patterns(fields: list[str]) -> list[str]:
    return [p for p in fields[0].split(",") if p] if fields else []


def read_entries(path: Path, name: str) -> tuple[list[KnownKey], list[Unreadable]]:
    """The keys `path` holds for `name`, and the lines naming it that cannot be read. Every unreadable
    line of the file is warned about once per process, whichever host it names."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [], []
    keys: list[KnownKey] = []
    unreadable: list[Unreadable] = []
    for number, text in enumerate(lines, 1):
        parsed = parse_line(text, path, number)
        if isinstance(parsed, Unreadable):
            warn_once(parsed)
            if matches(parsed.patterns, name):
                unreadable.append(parsed)
        elif parsed is not None and matches(parsed[0], name):
            keys.append(parsed[1])
    return keys, unreadable


def warn_once(line: Unreadable) -> None:
    """A warning about the operator's own file goes straight to stderr, once: no host owns it, and the
    transport has no other way to the terminal."""
    with _warn_lock:
        if line.where in _warned:
            return
        _warned.add(line.where)
    sys.stderr.write(f"gpudiag: warning: {line.where}: known_hosts line not read: {line.why}\n")
