"""Each ssh host's settings as OpenSSH itself resolves them, where `ssh` is installed:
`ssh -G [-F FILE] [-l USER] [-p PORT] NAME` (system config, Include, Match exec, every %-token and
environment variable), mapped onto what gpudiag's paramiko transport uses: HostName, User, Port, every
IdentityFile, ProxyJump, UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking (`no` taken as
accept-new: a changed key is always refused), ConnectTimeout, and notes for settings it does not honour
(ProxyCommand, ...).

`ssh -G` is asked once per distinct (name, user, port) and many at a time (`prefetch`), so an inventory of
a thousand hosts costs a few rounds of ssh runs, not a thousand in a row. Where ssh is missing, or cannot be
pointed at the files gpudiag reads, or `ssh -G` fails for a host, gpudiag's own reader (sshconfig.py)
resolves it instead and the reason is kept.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from shutil import which

from gpudiag.inventory.sshconfig import ENV_VAR, NOT_HONOURED, SYSTEM_ENV_VAR, SshConfig, SshConfigError, SshSettings
from gpudiag.inventory.sshconfig_match import DEFAULT_PORT, TokenError, connection_tokens, expand_identity
from gpudiag.ssh_options import SshOptions

OPENSSH_LABEL = "`ssh -G`"  # how a resolution by OpenSSH begins: "`ssh -G` (OpenSSH_9.2p1)"
TIMEOUT_S = 15.0  # a `Match exec` command runs within it
WORKERS = 16
# Values `ssh -G` prints for a setting left at its default that means "nothing to honour".
_OFF = {"none", "no", "false", "internal"}
# StrictHostKeyChecking as `ssh -G` prints it: `yes` is "true", `no` and `off` are "false".
_ACCEPTS_NEW = {"accept-new", "false"}
# Host-key settings gpudiag does not honour: where one is set, recording an unknown key could trust a key
# ssh would check under another name or refuse as revoked, so the config's accept-new is not applied.
_KEY_CHECKS_NOT_HONOURED = ("hostkeyalias", "revokedhostkeys", "knownhostscommand")
Key = tuple[str, "str | None", "int | None"]
Answer = tuple["dict[str, list[str]] | None", str]  # (ssh -G's settings, "") or (None, why it failed)


def use_openssh(config: SshConfig) -> None:
    """`config` resolves its hosts with `ssh -G` from now on, where ssh is installed and reads the same files;
    else it keeps its own reader and says why."""
    config.openssh, config.without_openssh = OpenSsh.find()


class OpenSsh:
    """`ssh -G` for one config: what it answered per (name, user, port), asked once each."""

    def __init__(self, program: str, version: str, config_file: str | None, defaults: dict[str, list[str]]):
        """`defaults`: what `ssh -G` says with no config at all (its built-in values)."""
        self.program, self.version, self.config_file = program, version, config_file
        self.defaults = defaults
        self.label = f"{OPENSSH_LABEL} ({version})"
        self._answers: dict[Key, Answer] = {}

    @classmethod
    def find(cls) -> tuple[OpenSsh | None, str]:
        """(OpenSsh, "") where `ssh -G` reads the files gpudiag would read; else (None, why not)."""
        program = which("ssh")
        if program is None:
            return None, "ssh not found"
        config_file = os.environ.get(ENV_VAR)
        if os.environ.get(SYSTEM_ENV_VAR) and not config_file:
            return None, f"{SYSTEM_ENV_VAR} names a system config ssh would not read"
        if _account_home() not in (None, Path.home()):  # ssh reads `~` (~/.ssh/config, Include) as the account's
            return None, "HOME is not the account's home directory, which ssh reads ~ as"
        # One run gives the version (-v's first line) and the IdentityFiles ssh offers when none is set.
        answer, why = run_ssh_g([program, "-v", "-G", "-F", os.devnull, "gpudiag-defaults.invalid"], with_version=True)
        if answer is None:
            return None, f"ssh -G failed: {why}"
        version = (answer.pop("", [""]) or [""])[0] or "OpenSSH"
        return cls(program, version, os.path.expanduser(config_file) if config_file else None, answer), ""

    def prefetch(self, keys: list[Key]) -> None:
        """Ask about every key not asked yet, WORKERS at a time."""
        todo = [key for key in dict.fromkeys(keys) if key not in self._answers]
        if len(todo) < 2:
            return
        with ThreadPoolExecutor(min(WORKERS, len(todo))) as pool:
            for key, answer in zip(todo, pool.map(self._ask, todo)):
                self._answers[key] = answer

    def settings(self, alias: str, user: str | None, port: int | None) -> SshSettings | str:
        """What ssh would use for `alias` (user and port given win, as on ssh's command line), or why
        `ssh -G` could not say."""
        key = (alias, user, port)
        if key not in self._answers:
            self._answers[key] = self._ask(key)
        answer, why = self._answers[key]
        if answer is None:
            return f"ssh -G failed: {why}"
        try:
            return self._settings(answer, alias, user, port)
        except TokenError as exc:
            raise SshConfigError(f"cannot apply ssh config to {alias!r}: {exc}") from None

    def _ask(self, key: Key) -> Answer:
        alias, user, port = key
        argv = [self.program, "-G"] + (["-F", self.config_file] if self.config_file else [])
        argv += (["-l", user] if user else []) + (["-p", str(port)] if port else [])
        return run_ssh_g(argv + ["--", alias])

    def _settings(self, found: dict[str, list[str]], alias: str, user: str | None, port: int | None) -> SshSettings:
        hostname = _one(found, "hostname") or alias
        their_user, their_port = _one(found, "user"), _one(found, "port")
        # The defaults ssh prints (the account's name, port 22) stay unset, as gpudiag's own reader leaves them.
        user = user or (their_user if their_user and their_user != _account_name() else None)
        if port is None and their_port and their_port.isdigit() and int(their_port) != DEFAULT_PORT:
            port = int(their_port)
        files = found.get("identityfile", [])
        files = [] if files == self.defaults.get("identityfile", []) else files
        tokens = connection_tokens(hostname.lower(), alias, user, port)
        identities = tuple(expand_identity(path, tokens) for path in files)
        jump = _one(found, "proxyjump")
        return SshSettings(
            hostname=hostname.lower(),
            user=user,
            port=port,
            identity_file=identities[0] if identities else None,
            proxy_jump=jump if jump and jump.lower() != "none" else None,
            ignored=tuple(_unhonoured(found)),
            identity_files=tuple(files),
            resolved_by=self.label,
            options=replace(self._options(found), identity_files=identities),
        )

    def _options(self, found: dict[str, list[str]]) -> SshOptions:
        """Known-hosts files (as ssh -G prints them: ~ and tokens expanded, space-separated), the host-key
        policy and ConnectTimeout. Files left at ssh's defaults keep gpudiag's own choice of files."""
        user_files = " ".join(found.get("userknownhostsfile", [])).split()
        global_files = " ".join(found.get("globalknownhostsfile", [])).split()
        named_user = found.get("userknownhostsfile") != self.defaults.get("userknownhostsfile")
        named = named_user or found.get("globalknownhostsfile") != self.defaults.get("globalknownhostsfile")
        timeout = _one(found, "connecttimeout") or "none"
        return SshOptions(
            known_hosts=tuple(user_files + global_files) if named else (),
            record_to=user_files[0] if named_user and user_files else None,
            accept_new=_accepts_new(found) and not _key_checks_not_honoured(found),
            connect_timeout=float(timeout) if timeout.isdigit() and int(timeout) > 0 else None,
        )


def _accepts_new(found: dict[str, list[str]]) -> bool:
    return (_one(found, "stricthostkeychecking") or "").lower() in _ACCEPTS_NEW


def _key_checks_not_honoured(found: dict[str, list[str]]) -> list[str]:
    return [NOT_HONOURED[key] for key in _KEY_CHECKS_NOT_HONOURED if (_one(found, key) or "none").lower() not in _OFF]


def _unhonoured(found: dict[str, list[str]]) -> list[str]:
    notes: list[str] = []
    unchecked = _key_checks_not_honoured(found)
    if _accepts_new(found) and unchecked:
        notes.append(f"StrictHostKeyChecking accept-new is not applied: {', '.join(unchecked)} is not honoured")
    elif (_one(found, "stricthostkeychecking") or "").lower() == "false":
        notes.append("StrictHostKeyChecking no is taken as accept-new (a changed host key is still refused)")

    for key, label in NOT_HONOURED.items():
        value = _one(found, key)
        if value is not None and value.lower() not in _OFF:
            hint = "; use ProxyJump" if key == "proxycommand" else ""
            notes.append(f"{label} is not supported (ignored{hint})")
    return notes


def _one(found: dict[str, list[str]], key: str) -> str | None:
    values = found.get(key)
    return values[0] if values else None


def run_ssh_g(argv: list[str], with_version: bool = False) -> Answer:
    """ssh -G's settings, each key's values in order; with_version: -v's first stderr line under key ""."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)[:200]
    errors = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("debug")]
    if proc.returncode != 0:
        return None, (errors or [f"exit {proc.returncode}"])[0][:200]  # the first: which line, which option
    found: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key.lower(), []).append(value)
    if with_version:
        first = proc.stderr.splitlines()[:1]
        found[""] = [first[0].split(",")[0].split()[0]] if first and first[0].startswith("OpenSSH") else []
    return found, ""


def _account_name() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def _account_home() -> Path | None:
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None
