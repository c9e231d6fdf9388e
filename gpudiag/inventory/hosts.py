"""Raw host records → resolved Hosts: local or ssh, ~/.ssh/config applied (inventory values win),
jump hosts written as inventory names or ssh aliases turned into ProxyJump specs, names made file-safe."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from gpudiag.inventory.base import LOCAL_NAMES, HostSpec, InventoryError
from gpudiag.models import Host, safe_file_name
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError, SshSettings
from gpudiag.inventory.sshconfig_match import TokenError, connection_tokens, expand_tokens

DEFAULT_PYTHON = "python3"
_HOP = re.compile(
    r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.%]+)\]|(?P<host>[^:@\s\[\]]+))"
    r"(?::(?P<port>\d+))?$"
)


def endpoint(address: str, user: str | None, port: int | None) -> str:
    """`[user@]address[:port]`, with brackets around an IPv6 address that has a port."""
    shown = f"[{address}]" if port and _is_ipv6(address) else address
    return f"{user + '@' if user else ''}{shown}{':' + str(port) if port else ''}"


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.split("%")[0]).version == 6
    except ValueError:
        return False


class HopResolver:
    """Turns a jump written as hop[,hop...] into a ProxyJump spec of real addresses, as OpenSSH follows it.

    A hop is an inventory host name (when `inventory_hop` knows it) or `[user@]host[:port]`, where
    host may be an ssh_config alias. OpenSSH reaches the last hop with `ssh -J <the hops before> last`, so
    the command line beats that hop's own ProxyJump, and only the first hop is reached with its own
    configuration (its own ProxyJump followed, recursively). `%h %n %p %r %%` in a jump value are the
    destination's, as in OpenSSH's ProxyJump; `none` is no jump.
    """

    def __init__(self, ssh: SshConfig, inventory_hop: Callable[[str, tuple[str, ...], bool], str | None] | None = None):
        self.ssh = ssh
        self.inventory_hop = inventory_hop
        self.notes: list[str] = []  # settings of ssh-config hops gpudiag cannot honour (the caller warns)
        self.hop_keys: list[tuple[str, str]] = []  # (hop alias, its IdentityFile): jump hosts get the
        # destination's key, the agent and the default keys

    def resolve(self, jump: str, stack: tuple[str, ...] = (), tokens: dict[str, str] | None = None) -> str:
        if tokens is not None:
            try:
                jump = expand_tokens(jump, tokens, "ProxyJump")
            except TokenError as exc:
                raise InventoryError(str(exc)) from None
        if jump.strip().lower() == "none":
            return ""
        parts = [part.strip() for part in jump.split(",") if part.strip()]
        return ",".join(self._hop(part, stack, own_jump=i == 0) for i, part in enumerate(parts))

    def _hop(self, hop: str, stack: tuple[str, ...], own_jump: bool) -> str:
        if hop in stack:
            raise InventoryError(f"jump hosts form a cycle: {' → '.join(stack + (hop,))}")
        if self.inventory_hop is not None:
            found = self.inventory_hop(hop, stack + (hop,), own_jump)
            if found is not None:
                return found
        match = _HOP.match(hop.removeprefix("ssh://"))
        if not match:
            raise InventoryError(f"jump {hop!r}: expected [user@]host[:port] or an inventory host name")
        alias = match.group("v6") or match.group("host")
        given_port = int(match.group("port")) if match.group("port") else None
        settings = _lookup(self.ssh, alias, match.group("user"), given_port)
        port, user = given_port or settings.port, match.group("user") or settings.user
        self.notes += [f"jump {alias}: {note}" for note in settings.ignored]
        if settings.identity_file:
            self.hop_keys.append((alias, settings.identity_file))
        spec = endpoint(settings.hostname, user, port)
        own = settings.proxy_jump if own_jump else None
        if own and own not in (hop, alias):  # `Host * ProxyJump x` hits x too: x is then reached directly
            before = self.resolve(own, stack + (hop,), jump_tokens(settings.hostname, alias, user, port))
            return f"{before},{spec}" if before else spec
        return spec


def jump_tokens(hostname: str, original: str, user: str | None, port: int | None) -> dict[str, str]:
    """The tokens OpenSSH's ProxyJump accepts (ssh_config(5) TOKENS): %h %n %p %r, and %%."""
    tokens = connection_tokens(hostname, original, user, port)
    return {key: tokens[key] for key in ("h", "n", "p", "r")}


def _lookup(ssh: SshConfig, alias: str, user: str | None = None, port: int | None = None) -> SshSettings:
    try:
        return ssh.lookup(alias, user=user, port=port)
    except SshConfigError as exc:
        raise InventoryError(str(exc)) from None


def ssh_host(
    name: str,
    address: str,
    *,
    user: str | None,
    port: int | None,
    identity_file: str | None,
    jump: str | None,
    hops: HopResolver,
    jump_stack: tuple[str, ...] = (),
    **rest: Any,
) -> Host:
    """An ssh Host: ssh_config fills what was not given; HostName always maps the alias."""
    settings = _lookup(hops.ssh, address, user, port)
    raw_jump = jump if jump is not None else settings.proxy_jump
    if raw_jump in (address, name):  # a catch-all `Host * ProxyJump bastion` also matches the bastion
        raw_jump = None
    hops.notes, hops.hop_keys = [], []
    tokens = jump_tokens(settings.hostname, address, user or settings.user, port or settings.port)
    resolved_jump = hops.resolve(raw_jump, jump_stack, tokens) if raw_jump else None
    key = _expand_home(identity_file) or settings.identity_file
    hop_keys = [
        f"jump {alias}: IdentityFile {path} is not used (a jump host is offered the destination's key, "
        f"the agent and the default keys)"
        for alias, path in hops.hop_keys
        if path != key
    ]
    notes = tuple(dict.fromkeys(settings.ignored + tuple(hops.notes) + tuple(hop_keys)))
    if notes:
        hops.ssh.notes_by_host[name] = notes
    hops.ssh.resolved_by[name] = settings.resolved_by
    return Host(
        name=name,
        address=settings.hostname,
        transport="ssh",
        user=user or settings.user,
        port=port or settings.port,
        identity_file=key,
        jump=resolved_jump or None,
        # a key the inventory names is the only one offered before the agent's and the defaults, as before
        ssh=replace(settings.options, identity_files=()) if settings.options and identity_file else settings.options,
        **rest,
    )


def _expand_home(path: str | None) -> str | None:
    """Only a leading `~/` is expanded (the file is read on this machine); the rest stays verbatim."""
    if path and path.startswith("~/"):
        return str(Path.home() / path[2:])
    return path


def _located(reason: str, path: str, line: int) -> str:
    """A reason that names no file (`FILE:LINE: ` or `FILE: `) gets the host's own place."""
    head = reason.split(" ", 1)[0]
    return reason if head.endswith(":") and ("/" in head or head.startswith(path)) else f"{path}:{line}: {reason}"


def is_local(spec: HostSpec) -> bool:
    if spec.local is not None:
        return spec.local
    return spec.name in LOCAL_NAMES and spec.address is None


class HostBuilder:
    """Builds every Host of one inventory; jumps naming other inventory hosts are resolved on demand."""

    def __init__(self, specs: list[HostSpec], path: str, ssh: SshConfig):
        self.specs = {s.name: s for s in specs}
        self.path = path
        self.hosts: dict[str, Host] = {}
        self.hops = HopResolver(ssh, self._inventory_hop)
        self.notes: dict[str, list[str]] = {}
        self.python_skips: set[str] = set()  # `--python` makes their one problem moot

    def build(self) -> Mapping[str, Host]:
        """Every host, each built on first use: ssh config (its `Match exec` commands included) is applied
        only to hosts a command targets, and a host that cannot be built is skipped with the reason, so a
        host nobody targets never blocks the command."""
        file_names: dict[str, str] = {}
        for name, spec in self.specs.items():
            safe = safe_file_name(name)
            if safe in file_names:
                raise self._error(
                    spec, f"hosts {file_names[safe]!r} and {name!r} would share the file name {safe!r}; rename one"
                )
            file_names[safe] = name
        return LazyHosts(self)

    def _error(self, spec: HostSpec, message: str) -> InventoryError:
        return InventoryError(f"{spec.path or self.path}:{spec.line}: host {spec.name!r}: {message}")

    def _host(self, name: str, stack: tuple[str, ...]) -> Host:
        if name in self.hosts:
            return self.hosts[name]
        spec = self.specs[name]
        path = spec.path or self.path
        common: dict[str, Any] = dict(
            name=safe_file_name(name),
            python=spec.python or DEFAULT_PYTHON,
            python_explicit=spec.python is not None,
            container=spec.container,
            server_log=spec.server_log,
            groups=tuple(spec.groups),
            source=f"{path}:{spec.line}",
            vars=tuple(sorted(spec.vars.items())),
        )
        if is_local(spec):
            host = Host(address=spec.address or "localhost", transport="local", **common)
        else:
            jump = spec.jump if spec.jump not in (name, None) else None  # a default jump skips the jump host
            try:
                host = ssh_host(
                    address=spec.address or name,
                    user=spec.user,
                    port=spec.port,
                    identity_file=spec.identity_file,
                    jump=jump,
                    hops=self.hops,
                    jump_stack=stack,
                    **common,
                )
            except InventoryError as exc:
                error = exc if str(exc).startswith(path) else self._error(spec, str(exc))
                host = Host(address=spec.address or name, transport="ssh", skip_reason=str(error), **common)
        reasons = [(_located(p.reason, path, spec.line), p.blocking) for p in spec.problems]
        blocking = [reason for reason, blocks in reasons if blocks]
        if blocking:
            host = host.with_(skip_reason="; ".join(blocking))
            if all(p.field == "python" for p in spec.problems if p.blocking):
                self.python_skips.add(host.name)
        notes = [reason for reason, blocks in reasons if not blocks]
        if notes:
            self.notes[host.name] = notes
        self.hosts[name] = host
        return host

    def host(self, name: str) -> Host:
        return self._host(name, (name,))

    def _inventory_hop(self, hop: str, stack: tuple[str, ...], own_jump: bool) -> str | None:
        if hop not in self.specs:
            return None
        host = self._host(hop, stack)
        if host.skip_reason:
            raise InventoryError(f"jump host {hop!r} is skipped ({host.skip_reason})")
        if host.transport != "ssh":
            raise InventoryError(f"jump host {hop!r} is reached locally, not over ssh")
        spec = endpoint(host.address, host.user, host.port)
        return f"{host.jump},{spec}" if host.jump and own_jump else spec


class LazyHosts(Mapping[str, Host]):
    """Inventory name → Host, in file order; each Host is built the first time it is looked up."""

    def __init__(self, builder: HostBuilder):
        self._builder = builder

    def __getitem__(self, name: str) -> Host:
        if name not in self._builder.specs:
            raise KeyError(name)
        return self._builder.host(name)

    def pending_lookups(self, names: list[str]) -> list[tuple[str, str | None, int | None]]:
        """The ssh config lookup each named ssh host not built yet will make: (address, user, port)."""
        specs = [self._builder.specs[n] for n in names if n in self._builder.specs and n not in self._builder.hosts]
        return [(s.address or s.name, s.user, s.port) for s in specs if not is_local(s)]

    def __contains__(self, name: object) -> bool:  # Mapping's default would build the host
        return name in self._builder.specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._builder.specs)

    def __len__(self) -> int:
        return len(self._builder.specs)

    def __repr__(self) -> str:
        return f"LazyHosts({list(self._builder.specs)})"
