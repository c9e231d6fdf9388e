"""known_hosts lines read as OpenSSH reads them (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT", hostfile.c).

The file is read as bytes and split only at `\\n` (getline), each line cut at a NUL (a C string): a form
feed, `\\r`, U+0085 or U+2028 ends no line, so a `#` comment holding one stays a comment. Fields are
separated by runs of spaces and tabs only (a non-breaking space is part of a field): an optional marker
(`@revoked`, `@cert-authority`), the host field, the key type, the base64 key and an optional comment.
A host field starting with `|` is one hashed name `|1|salt|hash` (commas and all); otherwise it is a
comma-separated list of patterns (`*`, `?`, `!negated`, literal `[host]:port`), compared in ASCII lower case.
The key type on the line must be the one inside the key blob, as sshkey_read requires.

A line gpudiag cannot read is never skipped in silence: it is an `Unreadable` naming file:line, warned
about once, and, when its host field names the host being checked, it stops --accept-new from recording a
key (OpenSSH would skip it; it may hold the host's real key). A hashed name with a malformed salt names no
host, as in OpenSSH: that line is warned about and every host is still checked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import struct
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import paramiko
from paramiko.pkey import UnknownKeyType

MARKERS = {b"@revoked": "revoked", b"@cert-authority": "cert-authority"}
_SEPARATOR = re.compile(rb"[ \t]+")
_B64_SPACE = re.compile(rb"[\n\r\v\f]")  # b64_pton skips isspace(); space and tab already end the field
_PATTERN_MAX = 1023  # match_pattern_list: a longer subpattern fails the whole list
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
    """A line that names hosts (maybe this one; `hosts` empty: none) with a key gpudiag cannot read, and why."""

    file: Path
    line: int
    hosts: bytes
    why: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def matches(hosts: bytes, name: str) -> bool:
    """hostfile.c match_maybe_hashed: one hashed name, or OpenSSH host patterns (wildcards, `!negation`)."""
    if not hosts:
        return False
    host = name.encode("utf-8", "surrogateescape").lower()
    if hosts.startswith(b"|"):
        salt = hashed_salt(hosts)
        if salt is None:
            return False
        digest = hmac.new(salt, host, hashlib.sha1).digest()
        return hosts == b"|1|" + base64.b64encode(salt) + b"|" + base64.b64encode(digest)
    hit = False
    for pattern in hosts.split(b","):
        negated = pattern.startswith(b"!")
        pattern = pattern[1:] if negated else pattern
        if len(pattern) >= _PATTERN_MAX:
            return False
        if _wildcard_match(pattern.lower(), host):
            if negated:
                return False
            hit = True
    return hit


def hashed_salt(hosts: bytes) -> bytes | None:
    """hostfile.c extract_salt: `|1|` then 1..1024 base64 characters decoding to 20 bytes, then `|`."""
    if not hosts.startswith(b"|1|"):
        return None
    encoded, bar, _ = hosts[3:].partition(b"|")
    if not bar or not 0 < len(encoded) <= 1024:
        return None
    try:
        salt = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return salt if len(salt) == hashlib.sha1().digest_size else None


def _wildcard_match(pattern: bytes, host: bytes) -> bool:
    """OpenSSH wildcards are only `*` and `?`; `[host]:port` brackets are literal."""
    regex = b"".join(b".*" if c == b"*" else b"." if c == b"?" else re.escape(c) for c in _bytes_of(pattern))
    return re.fullmatch(regex, host, re.DOTALL) is not None


def _bytes_of(text: bytes) -> list[bytes]:
    return [text[i : i + 1] for i in range(len(text))]


def _split_field(text: bytes) -> tuple[bytes, bytes | None]:
    """The field up to the first space or tab, and the rest after the separator (None: no separator)."""
    found = _SEPARATOR.search(text)
    if found is None:
        return text, None
    return text[: found.start()], text[found.end() :]


def _marker(text: bytes) -> tuple[str | None, bytes] | str:
    """hostfile.c check_markers: at most one marker, which ends at the line's first space, or at its first
    tab only when it has no space. Returns (marker, rest of line) or why the marker is invalid."""
    marker = None
    while text.startswith(b"@"):
        if marker is not None:
            return "more than one marker"
        end = text.find(b" ")
        if end < 0:
            end = text.find(b"\t")
        word = text[:end] if end > 0 else text
        if end <= 1 or end >= 32 or word not in MARKERS:
            return f"invalid marker {_show(word[:40])!r}"
        marker, text = MARKERS[word], text[end:].lstrip(b" \t")
    return marker, text


def parse_line(raw: bytes | str, path: Path, number: int) -> tuple[bytes, KnownKey] | Unreadable | None:
    """One line: None for a blank or comment line, else its host field and key, or why it cannot be read."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    text = raw.split(b"\0", 1)[0].lstrip(b" \t")
    if not text or text.startswith(b"#"):
        return None
    marked = _marker(text)
    if isinstance(marked, str):
        fields = _SEPARATOR.split(text)
        return Unreadable(
            path, number, fields[1] if len(fields) > 1 else b"", marked + " (OpenSSH ignores the line too)"
        )
    marker, text = marked
    hosts, rest = _split_field(text)
    if hosts.startswith(b"|") and hashed_salt(hosts) is None:
        return Unreadable(path, number, b"", "a hashed host name with a malformed salt (OpenSSH skips the line too)")
    if rest is None or not rest or rest.startswith(b"#"):
        # no key on it, so none it could hold for a host: warned about, names no host
        return Unreadable(path, number, b"", "fewer fields than host, key type and key")
    key_type, rest = _split_field(rest)
    if rest is None or not rest:
        return Unreadable(path, number, b"", "fewer fields than host, key type and key")
    blob, _ = _split_field(rest)
    why = _key_problem(key_type, blob)
    if isinstance(why, str):
        return Unreadable(path, number, hosts, why)
    return hosts, KnownKey(why, path, number, marker)


def _key_problem(key_type: bytes, blob: bytes) -> paramiko.PKey | str:
    """The key, or why it cannot be read (sshkey_read: the blob's own type must be the line's)."""
    shown = _show(key_type[:60])
    if key_type.isdigit():  # SSH protocol 1 "bits exponent modulus": OpenSSH no longer reads these either
        return "an SSH-1 RSA key"
    try:
        data = base64.b64decode(_B64_SPACE.sub(b"", blob), validate=True)
    except (binascii.Error, ValueError):
        return "the key is not valid base64"
    inner = _blob_type(data)
    try:
        name = key_type.decode("ascii")
        key = paramiko.PKey.from_type_string(name, data)
    except (UnicodeDecodeError, UnknownKeyType):
        return f"key type {shown} is not one gpudiag can check"
    except Exception as exc:  # a truncated or inconsistent key blob: paramiko raises several kinds
        return f"the {shown} key cannot be read ({type(exc).__name__})"
    if inner != key_type:
        return f"the line says {shown} but the key is {_show((inner or b'?')[:60])}"
    return key


def _blob_type(data: bytes) -> bytes | None:
    if len(data) < 4:
        return None
    (size,) = struct.unpack(">I", data[:4])
    return data[4 : 4 + size] if 4 + size <= len(data) else None


def _show(text: bytes) -> str:
    return text.decode("utf-8", "replace").encode("ascii", "backslashreplace").decode("ascii")


def read_lines(path: Path) -> list[bytes]:
    """The file's lines as OpenSSH's getline loop sees them: split at `\\n` only."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def read_entries(path: Path, name: str) -> tuple[list[KnownKey], list[Unreadable]]:
    """The keys `path` holds for `name`, and the lines naming it that cannot be read. Every unreadable
    line of the file is warned about once per process, whichever host it names."""
    try:
        lines = read_lines(path)
    except OSError:
        return [], []
    keys: list[KnownKey] = []
    unreadable: list[Unreadable] = []
    for number, text in enumerate(lines, 1):
        parsed = parse_line(text, path, number)
        if isinstance(parsed, Unreadable):
            warn_once(parsed)
            if matches(parsed.hosts, name):
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
