"""Host-key checking for the ssh transport: ~/.ssh/known_hosts (or the files a host's ssh config names in
UserKnownHostsFile and GlobalKnownHostsFile) plus gpudiag's own known-hosts file.

A changed key is never accepted, --accept-new or not, and no file is written then; an unknown one is
recorded only with --accept-new or the host's StrictHostKeyChecking accept-new, in gpudiag's own file or in
the first UserKnownHostsFile the host's ssh config names (as OpenSSH records there),
and not when a line gpudiag cannot read names the host (it may hold the host's real key). Lines are read
by transports/known_hosts.py. A key on a `@revoked` line is refused
and never recorded. Hashed entries, `[host]:port`, wildcards and negation are read as OpenSSH reads them.
`@cert-authority` lines are understood but not used: paramiko offers no host certificates, so such a
host is refused as unknown, with a reason that says so.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import threading
from pathlib import Path

import paramiko

from gpudiag.models import HOST_KEY_CHANGED, HOST_KEY_REVOKED, HOST_KEY_UNKNOWN
from gpudiag.transports.known_hosts import KnownKey, Unreadable, read_entries

ENV_KNOWN_HOSTS = "GPUDIAG_KNOWN_HOSTS"
USER_KNOWN_HOSTS = "~/.ssh/known_hosts"
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
_append_lock = threading.Lock()
_BRACKETED = re.compile(r"\[(.*)\]:(\d+)")


class KnownHostsPathError(Exception):
    """gpudiag's own known-hosts file cannot be used (a usage error, found before connecting)."""


def check_own_file(explicit: str | None, accept_new: bool) -> Path:
    """The own known-hosts path, checked: readable when it exists, and creatable or writable when
    --accept-new may append to it."""
    path = own_known_hosts_path(explicit)
    if path.is_dir():
        raise KnownHostsPathError(f"known-hosts file {path}: is a directory")
    if path.exists() and not os.access(path, os.R_OK):
        raise KnownHostsPathError(f"known-hosts file {path}: not readable")
    if accept_new:
        # Open it for appending now (creating it, as OpenSSH creates known_hosts): the only sure test,
        # since permission bits say little to root, and /proc or a read-only mount refuse only on write.
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with open(path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise KnownHostsPathError(
                f"known-hosts file {path}: cannot be written ({exc.strerror or exc}); --accept-new records keys there"
            ) from None
    return path


class HostKeyError(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def own_known_hosts_path(explicit: str | None = None) -> Path:
    """gpudiag's own file: --known-hosts, else $GPUDIAG_KNOWN_HOSTS, else ~/.config/gpudiag/known_hosts."""
    chosen = explicit or os.environ.get(ENV_KNOWN_HOSTS) or "~/.config/gpudiag/known_hosts"
    return Path(chosen).expanduser()


def host_id(address: str, port: int | None) -> str:
    """The name known_hosts uses: `host` on port 22, `[host]:port` otherwise."""
    return address if port in (None, 22) else f"[{address}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


class HostKeyChecker:
    """Decides about one server key: known (fine), changed (refuse), unknown (refuse or record)."""

    def __init__(
        self,
        accept_new: bool = False,
        own_file: str | None = None,
        extra_files: list[str] | None = None,
        record_to: str | None = None,
    ):
        """`extra_files`: the files read besides the own one (ssh config's UserKnownHostsFile and
        GlobalKnownHostsFile; a missing one knows no key); `record_to`: where a new key is recorded instead
        of the own file (the first UserKnownHostsFile, as ssh records there)."""
        self.accept_new = accept_new
        self.own_file = own_known_hosts_path(own_file)
        files = extra_files if extra_files is not None else [USER_KNOWN_HOSTS, SYSTEM_KNOWN_HOSTS]
        self.files = [Path(f).expanduser() for f in files] + [self.own_file]
        self.record_file = Path(record_to).expanduser() if record_to else self.own_file

    def entries(self, name: str) -> list[KnownKey]:
        return self._read(name)[0]

    def _read(self, name: str) -> tuple[list[KnownKey], list[Unreadable]]:
        keys: list[KnownKey] = []
        unreadable: list[Unreadable] = []
        for path in self.files:
            found, odd = read_entries(path, name)
            keys += found
            unreadable += odd
        return keys, unreadable

    def known(self, name: str) -> list[KnownKey]:
        """Keys trusted for `name` (plain lines; not revoked, not CA keys)."""
        return [k for k in self.entries(name) if k.marker is None]

    def known_types(self, name: str) -> list[str]:
        """Key types known for `name` (plain lines), so the server is asked for a key we can check."""
        types: list[str] = []
        for known in self.known(name):
            if known.key.get_name() not in types:
                types.append(known.key.get_name())
        return types

    def check(self, name: str, key: paramiko.PKey) -> None:
        """Return when the key is trusted (maybe after recording it); raise HostKeyError otherwise.

        As OpenSSH's check_hostkeys_by_key_or_type: the plain keys known for the host, of every type, are
        considered together; one equal to the server's key trusts it, any other makes it a changed key
        (a server offering a type not among them is one too); a matching @revoked line refuses it whatever
        else is known. A host on another port with no plain key for `[host]:port` is trusted by a plain
        key for the bare host, as ssh's "checking without port identifier"."""
        entries, unreadable = self._read(name)
        revoked = [k for k in entries if k.marker == "revoked" and k.key.asbytes() == key.asbytes()]
        if revoked:  # before anything else: a revoked key is refused even where a plain line trusts it
            raise HostKeyError(
                HOST_KEY_REVOKED,
                f"host key for {name} is REVOKED: server offers {key.get_name()} {fingerprint(key)}, "
                f"marked @revoked at {revoked[0].where}; not accepted, not recorded",
            )
        known = [k for k in entries if k.marker is None]
        if any(k.key.asbytes() == key.asbytes() for k in known):
            return
        if known:
            raise HostKeyError(HOST_KEY_CHANGED, _changed(name, key, known))
        if self._known_without_port(name, key):
            return
        if unreadable and self.accept_new:  # that line may hold this host's real key: never record over it
            odd = unreadable[0]
            raise HostKeyError(
                HOST_KEY_UNKNOWN,
                f"host key for {name} is not known: {key.get_name()} {fingerprint(key)}; {odd.where} names this "
                f"host with a line gpudiag cannot read ({odd.why}): not recorded; fix or remove that line",
            )
        authorities = [k for k in entries if k.marker == "cert-authority"]
        if not self.accept_new or authorities:
            ca = (
                (
                    f"; {authorities[0].where} names a @cert-authority for it, but gpudiag cannot check host "
                    f"certificates: add the host key itself"
                )
                if authorities
                else ""
            )
            hint = "" if authorities else "; check it, then rerun with --accept-new to trust it"
            raise HostKeyError(
                HOST_KEY_UNKNOWN,
                f"host key for {name} is not known: {key.get_name()} {fingerprint(key)}{ca}{hint}",
            )
        self.record(name, key)

    def _known_without_port(self, name: str, key: paramiko.PKey) -> bool:
        """sshconnect.c: a new `[host]:port` is checked once more as `host`; only a plain, unrevoked key
        equal to the server's trusts it there."""
        bare = _BRACKETED.fullmatch(name)
        if bare is None or bare.group(2) == "22":
            return False
        entries = self._read(bare.group(1))[0]
        same = [k for k in entries if k.key.asbytes() == key.asbytes()]
        return any(k.marker is None for k in same) and not any(k.marker == "revoked" for k in same)

    def record(self, name: str, key: paramiko.PKey) -> None:
        """Append `name keytype base64` to the record file; safe across threads and processes. Lines are
        compared as OpenSSH splits them (at `\\n` only), so a comment holding a form feed hides nothing."""
        try:
            self._append(f"{name} {key.get_name()} {key.get_base64()}".encode())
        except OSError as exc:
            raise HostKeyError(
                HOST_KEY_UNKNOWN,
                f"host key for {name} is not known: {key.get_name()} {fingerprint(key)}; it cannot be recorded in "
                f"{self.record_file} ({exc.strerror or exc})",
            ) from None

    def _append(self, line: bytes) -> None:
        if self.record_file == self.own_file:  # ssh creates no directory for a UserKnownHostsFile
            self.own_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _append_lock, open(self.record_file, "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                fh.seek(0)
                text = fh.read()
                if line not in text.split(b"\n"):
                    fh.write((b"\n" if text and not text.endswith(b"\n") else b"") + line + b"\n")
                    fh.flush()
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _changed(name: str, key: paramiko.PKey, known: list[KnownKey]) -> str:
    """OpenSSH's "REMOTE HOST IDENTIFICATION HAS CHANGED", in one line, naming the offending line."""
    same_type = [k for k in known if k.key.get_name() == key.get_name()]
    old = (same_type or known)[0]
    other = (
        ""
        if same_type
        else f" (no {key.get_name()} key is known for it: a server offering another key type than the known "
        f"ones is a changed key, as in OpenSSH)"
    )
    return (
        f"host key for {name} CHANGED (REMOTE HOST IDENTIFICATION HAS CHANGED): server offers {key.get_name()} "
        f"{fingerprint(key)}, offending {old.key.get_name()} key at {old.where} is {fingerprint(old.key)}{other}; "
        f"not accepted (if the change is expected, remove that line)"
    )
