"""OpenSSH client config (~/.ssh/config, or the file env GPUDIAG_SSH_CONFIG names) read through
paramiko.SSHConfig: HostName, User, Port, IdentityFile and ProxyJump for a host alias. Settings that
cannot be honoured (ProxyCommand, a bad Port) are returned as data for the command line to warn about."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


ENV_VAR = "GPUDIAG_SSH_CONFIG"


class SshConfigError(ValueError):
    """The ssh config file cannot be read; one line, naming the file."""


@dataclass(frozen=True)
class SshSettings:
    hostname: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    proxy_jump: str | None = None
    ignored: tuple[str, ...] = ()     # settings found but not honoured, one phrase each (callers warn)


def config_path() -> Path:
    override = os.environ.get(ENV_VAR)
    return Path(override).expanduser() if override else Path("~/.ssh/config").expanduser()


class SshConfig:
    """The parsed config; a missing file is an empty config (as for OpenSSH)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else config_path()
        # paramiko loads only when there is a config to read: a localhost scan needs no SSH at all.
        self._config: Any = None
        if self.path.is_file():
            import paramiko
            try:
                self._config = paramiko.SSHConfig.from_path(str(self.path))
            except (OSError, UnicodeDecodeError, ValueError, paramiko.ssh_exception.ConfigParseError) as exc:
                raise SshConfigError(f"{self.path}: cannot read ssh config: {' '.join(str(exc).split())}") \
                    from None

    @classmethod
    def from_text(cls, text: str) -> "SshConfig":
        import paramiko
        config = cls(path=os.devnull)
        config._config = paramiko.SSHConfig.from_text(text)
        return config

    def aliases(self) -> set[str]:
        """The `Host` patterns that name one host exactly (no wildcard, no negation)."""
        if self._config is None:
            return set()
        return {h for h in self._config.get_hostnames() if not any(c in h for c in "*?!")}

    def lookup(self, alias: str) -> SshSettings:
        if self._config is None:
            return SshSettings(hostname=alias, user=None, port=None, identity_file=None, proxy_jump=None)
        try:
            found = self._config.lookup(alias)
        except Exception as exc:  # paramiko raises assorted errors for odd Match/token lines
            raise SshConfigError(f"{self.path}: cannot apply ssh config to {alias!r}: {exc}") from None
        port = found.get("port")
        identity = found.get("identityfile") or [None]
        jump = found.get("proxyjump")
        return SshSettings(hostname=found.get("hostname") or alias, user=found.get("user"),
                           port=int(port) if port and str(port).isdigit() else None,
                           identity_file=identity[0],
                           proxy_jump=None if not jump or jump.lower() == "none" else jump,
                           ignored=_not_honoured(found))

    def ignored(self, alias: str) -> tuple[str, ...]:
        """The settings for `alias` that gpudiag does not honour; () when none or the lookup fails
        (a failing lookup is reported where the host is resolved)."""
        try:
            return self.lookup(alias).ignored
        except SshConfigError:
            return ()


def _not_honoured(found: dict[str, Any]) -> tuple[str, ...]:
    notes = []
    proxy = found.get("proxycommand")
    if proxy and str(proxy).lower() != "none":
        notes.append("ProxyCommand is not supported (ignored; use ProxyJump)")
    port = found.get("port")
    if port and not str(port).isdigit():
        notes.append(f"Port {port!r} is not a number (ignored; port 22 is used)")
    return tuple(notes)
