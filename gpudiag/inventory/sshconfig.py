"""OpenSSH client config (~/.ssh/config then /etc/ssh/ssh_config, or only GPUDIAG_SSH_CONFIG's file, as
`ssh -F` reads it) resolved as `ssh -G` does: `Include`, `Host`, `Match` blocks in file order, first value
wins (IdentityFile accumulates), a second pass for `Match final`, %-tokens. Yields HostName, User, Port,
IdentityFile and ProxyJump, with notes on what gpudiag cannot honour. Where `use_openssh` finds ssh,
`ssh -G` itself answers each lookup (ssh_openssh.py) and this reader is the fallback."""

from __future__ import annotations

import fnmatch
import os
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from gpudiag.ssh_options import SSH_G_ONLY, SshOptions
from gpudiag.inventory.sshconfig_file import ConfigFile, Directive, SshConfigError, parse_text, read_config
from gpudiag.inventory.sshconfig_match import (
    MatchContext,
    TokenError,
    connection_tokens,
    expand_identity,
    expand_tokens,
    host_line_matches,
    match_line,
)

__all__ = ["ENV_VAR", "SshConfig", "SshConfigError", "SshSettings", "config_path", "system_config_path"]

ENV_VAR = "GPUDIAG_SSH_CONFIG"
# The system-wide file, read after the user's (first value wins); the variable moves it (tests, containers).
SYSTEM_ENV_VAR = "GPUDIAG_SSH_SYSTEM_CONFIG"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
# Settings that change how a host is reached and that gpudiag's ssh transport does not implement.
NOT_HONOURED = {
    "proxycommand": "ProxyCommand",
    "hostkeyalias": "HostKeyAlias",
    "certificatefile": "CertificateFile",
    "pkcs11provider": "PKCS11Provider",
    "securitykeyprovider": "SecurityKeyProvider",
    "canonicalizehostname": "CanonicalizeHostname",
    "bindaddress": "BindAddress",
    "bindinterface": "BindInterface",
    "identitiesonly": "IdentitiesOnly",
    "identityagent": "IdentityAgent",
    "revokedhostkeys": "RevokedHostKeys",
    "knownhostscommand": "KnownHostsCommand",
}
# Values of those settings that mean "off", i.e. nothing to honour.
_OFF_VALUES = {"none", "no", "false"}
OWN_READER = "gpudiag's own ssh_config reader"
_FIRST_WINS = ("hostname", "user", "port", "proxy") + tuple(NOT_HONOURED) + tuple(SSH_G_ONLY)


@dataclass(frozen=True)
class SshSettings:
    hostname: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None  # the first IdentityFile, ~ and tokens expanded
    proxy_jump: str | None = None
    ignored: tuple[str, ...] = ()  # settings found but not honoured, one phrase each (callers warn)
    identity_files: tuple[str, ...] = ()  # every IdentityFile as written (what `ssh -G` prints)
    resolved_by: str = OWN_READER  # `ssh -G` (VERSION), or this reader and why ssh -G was not used
    options: SshOptions | None = None  # known hosts, host-key policy, timeout, every key (ssh -G only)


def config_path() -> Path:
    override = os.environ.get(ENV_VAR)
    return Path(override).expanduser() if override else Path("~/.ssh/config").expanduser()


def system_config_path() -> Path | None:
    """The system-wide config ssh reads after the user's; None when GPUDIAG_SSH_CONFIG stands for `ssh -F`."""
    if os.environ.get(ENV_VAR):
        return None
    return Path(os.environ.get(SYSTEM_ENV_VAR) or SYSTEM_CONFIG)


@dataclass
class _Options:
    """One resolution's state: first value per option, identity files in order."""

    values: dict[str, list[str]] = field(default_factory=dict)
    identity_files: list[str] = field(default_factory=list)

    def apply(self, directive: Directive) -> None:
        key = "proxy" if directive.keyword in ("proxyjump", "proxycommand") else directive.keyword
        if key == "identityfile":
            self.identity_files += directive.args[:1]
        elif key in _FIRST_WINS and key not in self.values and directive.args:
            self.values[key] = [directive.keyword] + directive.args

    def first(self, key: str) -> str | None:
        found = self.values.get(key)
        return " ".join(found[1:]) if found else None


class SshConfig:
    """A parsed config; a missing file is an empty config (as for OpenSSH)."""

    def __init__(self, path: str | Path | None = None, system: str | Path | None = None):
        """`path` alone is read as `ssh -F path` reads it; without it, the user's config and the system's."""
        self.path = Path(path) if path is not None else config_path()
        self._root: ConfigFile = read_config(self.path) if self.path.is_file() else ConfigFile(str(self.path), [])
        found = Path(system) if system is not None else (system_config_path() if path is None else None)
        self.system = found if found is not None and found.is_file() else None
        if self.system is not None:
            # Each file starts with every option applying (a `Host *`), whatever block ended the one before.
            restart = Directive("host", ["*"], str(self.system), 0)
            system_file = read_config(self.system, relative_to=self.system.parent)
            self._root = ConfigFile(str(self.path), self._root.directives + [restart] + system_file.directives)
        self._cache: dict[tuple[str, str | None, int | None], SshSettings] = {}
        # Host name → what its own lookup could not honour (filled as hosts are built, warned once each)
        self.notes_by_host: dict[str, tuple[str, ...]] = {}
        self.openssh: Any = None  # an OpenSsh, set by ssh_openssh.use_openssh where ssh can resolve hosts
        self.without_openssh = ""  # why OpenSSH does not resolve hosts here
        self.resolved_by: dict[str, str] = {}  # host name → SshSettings.resolved_by (filled as hosts are built)

    def prefetch(self, keys: list[tuple[str, str | None, int | None]]) -> None:
        """(name, user, port) lookups about to be made, asked of `ssh -G` side by side."""
        if self.openssh is not None:
            self.openssh.prefetch([key for key in keys if key not in self._cache])

    @classmethod
    def from_text(cls, text: str) -> "SshConfig":
        config = cls(path=os.devnull)
        config._root = parse_text(text)
        return config

    def aliases(self) -> set[str]:
        """The `Host` patterns that name one host exactly (no wildcard, no negation)."""
        found: set[str] = set()

        def visit(config: ConfigFile) -> None:
            for directive in config.directives:
                if directive.keyword == "host":
                    found.update(a for a in directive.args if not any(c in a for c in "*?!"))
                for sub in directive.included:
                    visit(sub)

        visit(self._root)
        return found

    def _any(self, found: Callable[[Directive], bool]) -> bool:
        """Whether a directive of the config, its Includes' included, satisfies `found`."""

        def visit(config: ConfigFile) -> bool:
            return any(found(d) or any(visit(sub) for sub in d.included) for d in config.directives)

        return visit(self._root)

    def runs_commands(self) -> bool:
        """Whether a `Match exec` line runs a command when a host is resolved."""
        return self._any(lambda d: d.keyword == "match" and any(a.lower() == "exec" for a in d.args))

    def configures(self, name: str) -> bool:
        """Whether a `Host` line other than a bare `*` applies to `name`: the user set ssh up for it."""

        def applies(d: Directive) -> bool:
            plain = [a for a in d.args if not a.startswith("!") and a != "*"]
            negated = [a[1:] for a in d.args if a.startswith("!")]
            matched = any(fnmatch.fnmatchcase(name, p) for p in plain)
            return d.keyword == "host" and matched and not any(fnmatch.fnmatchcase(name, n) for n in negated)

        return self._any(applies)

    def lookup(self, alias: str, user: str | None = None, port: int | None = None) -> SshSettings:
        """What `ssh -G [-l user] [-p port] alias` would use (user and port given here win)."""
        key = (alias, user, port)
        if key not in self._cache:
            found = self.openssh.settings(alias, user, port) if self.openssh is not None else self.without_openssh
            if not isinstance(found, SshSettings):
                own = _Resolution(self._root, alias, user, port).settings()
                found = replace(own, resolved_by=f"{OWN_READER}: {found}" if found else OWN_READER)
            self._cache[key] = found
        return self._cache[key]

    def ignored(self, alias: str) -> tuple[str, ...]:
        """The settings for `alias` that gpudiag does not honour; () when none or the lookup fails
        (a failing lookup is reported where the host is resolved)."""
        try:
            return self.lookup(alias).ignored
        except SshConfigError:
            return ()


class _Resolution:
    def __init__(self, root: ConfigFile, alias: str, user: str | None, port: int | None):
        self.root, self.alias = root, alias
        self.options = _Options()
        if user:
            self.options.values["user"] = ["user", user]
        if port:
            self.options.values["port"] = ["port", str(port)]
        self.notes: list[str] = []

    def settings(self) -> SshSettings:
        ctx = self._context(self.alias, final_pass=False)
        self._walk(self.root, ctx, self.alias, never_match=False)
        hostname = self._hostname()
        if ctx.wants_final_pass:
            # As ssh does: the hostname is fixed, then every block is read again with `final` true and
            # Host lines matched against that hostname; first values still win.
            self.options.values["hostname"] = ["hostname", hostname.replace("%", "%%")]
            final = self._context(hostname, final_pass=True)
            self._walk(self.root, final, hostname, never_match=False)
            self.notes += final.notes
        self.notes = ctx.notes + self.notes
        return self._build(hostname)

    def _context(self, host: str, final_pass: bool) -> MatchContext:
        return MatchContext(host=host, original=self.alias, user=None, port=None, final_pass=final_pass)

    def _walk(self, config: ConfigFile, ctx: MatchContext, host: str, never_match: bool) -> None:
        """One file in order; an Include inside a block that does not apply reads its files as never
        matching, and the including block's state comes back after it (OpenSSH's NEVERMATCH)."""
        active = not never_match
        for directive in config.directives:
            if directive.keyword == "host":
                active = not never_match and host_line_matches(host, directive.args)
            elif directive.keyword == "match":
                self._refresh(ctx)
                matched = match_line(directive, ctx, evaluate_exec=not never_match)
                active = matched and not never_match
            elif directive.keyword == "include":
                for sub in directive.included:
                    self._walk(sub, ctx, host, never_match=never_match or not active)
            elif active:
                self.options.apply(directive)

    def _refresh(self, ctx: MatchContext) -> None:
        """Match host/user/exec see the values obtained so far."""
        hostname = self.options.first("hostname")
        if hostname is not None:
            ctx.host = self._expand_hostname(hostname)
        ctx.user = self.options.first("user")
        ctx.port = self._port(record=False)

    def _expand_hostname(self, value: str) -> str:
        try:
            return expand_tokens(value, {"h": self.alias}, "HostName")
        except TokenError as exc:
            raise SshConfigError(f"cannot apply ssh config to {self.alias!r}: {exc}") from None

    def _hostname(self) -> str:
        value = self.options.first("hostname")
        return (self._expand_hostname(value) if value is not None else self.alias).lower()

    def _port(self, record: bool) -> int | None:
        value = self.options.first("port")
        if value is None:
            return None
        if value.isdigit() and 0 < int(value) < 65536:
            return int(value)
        try:
            return socket.getservbyname(value, "tcp")
        except OSError:
            if record:
                self.notes.append(f"Port {value!r} is not a number (ignored; port 22 is used)")
            return None

    def _build(self, hostname: str) -> SshSettings:
        port, user = self._port(record=True), self.options.first("user")
        jump = None
        proxy = self.options.values.get("proxy")
        if proxy and proxy[0] == "proxyjump" and proxy[1].lower() != "none":
            jump = proxy[1]
        identity = (
            self._identity(self.options.identity_files[0], hostname, user, port)
            if self.options.identity_files
            else None
        )
        if len(self.options.identity_files) > 1:
            self.notes.append(
                f"IdentityFile: {len(self.options.identity_files)} files given; gpudiag offers "
                f"the first ({self.options.identity_files[0]}), then agent and default keys"
            )
        for key, label in NOT_HONOURED.items():
            found = self.options.values.get("proxy" if key == "proxycommand" else key)
            if found and found[0] == key and found[1].lower() not in _OFF_VALUES:
                hint = "; use ProxyJump" if key == "proxycommand" else ""
                self.notes.append(f"{label} is not supported (ignored{hint})")
        named = [label for key, label in SSH_G_ONLY.items() if key in self.options.values]
        self.notes += [f"{label} is honoured only where ssh -G resolves the host (ignored)" for label in named]
        return SshSettings(
            hostname=hostname,
            user=user,
            port=port,
            identity_file=identity,
            proxy_jump=jump,
            ignored=tuple(dict.fromkeys(self.notes)),
            identity_files=tuple(self.options.identity_files),
        )

    def _identity(self, written: str, hostname: str, user: str | None, port: int | None) -> str:
        try:
            return expand_identity(written, connection_tokens(hostname, self.alias, user, port))
        except TokenError as exc:
            raise SshConfigError(f"cannot apply ssh config to {self.alias!r}: {exc}") from None
