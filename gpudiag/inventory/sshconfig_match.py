"""OpenSSH's matching rules: `Host` patterns, `Match` criteria (host, originalhost, user, localuser,
all, canonical, final, exec) and %-tokens. `Match exec` runs its command as ssh does: through the
user's $SHELL (`/bin/sh` when unset) with `-c`, stdin and stdout on /dev/null; exit 0 means match.
gpudiag adds a time limit, so a hanging command reads as no match, with a note."""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gpudiag.inventory.sshconfig_file import Directive

EXEC_TIMEOUT_S = 10.0
DEFAULT_PORT = 22
CRITERIA = ("all", "canonical", "final", "exec", "host", "originalhost", "user", "localuser")
_NO_ARGUMENT = ("all", "canonical", "final")


class TokenError(ValueError):
    """A %-token this setting does not know."""


@lru_cache(maxsize=4096)
def _pattern(pattern: str) -> re.Pattern[str]:
    # OpenSSH patterns know `*` and `?` only: `[` is an ordinary character.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def match_pattern(text: str, pattern: str) -> bool:
    return _pattern(pattern).fullmatch(text) is not None


def match_pattern_list(text: str, patterns: str, lower: bool = False) -> int:
    """OpenSSH's match_pattern_list: 1 a pattern matches, -1 a negated one does (it wins), 0 neither."""
    if lower:
        text, patterns = text.lower(), patterns.lower()
    positive = 0
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if match_pattern(text, pattern[1:] if negated else pattern):
            if negated:
                return -1
            positive = 1
    return positive


def host_line_matches(host: str, args: list[str]) -> bool:
    """`Host p1 !p2 ...`: some pattern matches and no negated one does."""
    matched = False
    for arg in args:
        negated = arg.startswith("!")
        if match_pattern(host, arg[1:] if negated else arg):
            if negated:
                return False
            matched = True
    return matched


def local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME: OpenSSH would refuse; keep a stable name
        return str(os.getuid())


def local_hostname() -> str:
    return socket.gethostname()


def expand_tokens(text: str, values: dict[str, str], what: str) -> str:
    """`%X` → values[X], `%%` → `%`; an unknown token is an error, as in OpenSSH."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        token = text[i + 1 : i + 2]
        if token == "%":
            out.append("%")
        elif token in values:
            out.append(values[token])
        else:
            raise TokenError(f"{what}: unknown token %{token or ''} in {text!r}")
        i += 2
    return "".join(out)


def connection_tokens(hostname: str, original: str, user: str | None, port: int | None) -> dict[str, str]:
    """The tokens IdentityFile and Match exec accept (as far as gpudiag knows them)."""
    local = local_hostname()
    remote_user = user or local_user()
    port_text = str(port or DEFAULT_PORT)
    return {
        "h": hostname,
        "n": original,
        "r": remote_user,
        "p": port_text,
        "u": local_user(),
        "d": str(Path.home()),
        "l": local,
        "L": local.split(".")[0],
        "i": str(os.getuid()),
        "k": original,  # HostKeyAlias (not honoured) else the host as given
        "C": hashlib.sha1(f"{local}{hostname}{port_text}{remote_user}".encode()).hexdigest(),
    }


def expand_identity(written: str, tokens: dict[str, str]) -> str:
    """An IdentityFile as ssh reads it when it connects: ~, `${VAR}` from the environment, then %-tokens
    (`ssh -G` prints it as written)."""
    expanded = _ENV_REF.sub(lambda m: _env_value(m.group(1)), os.path.expanduser(written))
    return expand_tokens(expanded, tokens, "IdentityFile")


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _env_value(name: str) -> str:
    value = os.environ.get(name)
    if value is None:  # ssh refuses the connection the same way
        raise TokenError(f"IdentityFile: environment variable {name} is not set")
    return value


@dataclass
class MatchContext:
    """What a Match line is evaluated against, at the point of the file where it stands."""

    host: str  # HostName so far (with %h expanded), else the host as given
    original: str  # the host as given (alias)
    user: str | None  # User so far (or given on the command line)
    port: int | None
    final_pass: bool
    notes: list[str] = field(default_factory=list)
    wants_final_pass: bool = False


def match_line(directive: Directive, ctx: MatchContext, evaluate_exec: bool = True) -> bool:
    """Whether a `Match` line matches; criteria gpudiag cannot evaluate make it not match, with a note."""
    args, result, i = directive.args, True, 0
    if not args:
        ctx.notes.append(f"{directive.where}: Match without criteria (ignored)")
        return False
    while i < len(args):
        word = args[i]
        negated = word.startswith("!")
        name = (word[1:] if negated else word).lower()
        if name not in CRITERIA:
            if not result:  # an earlier criterion already failed: this one cannot change the answer
                return False
            ctx.notes.append(f"{directive.where}: Match {name} is not supported (the block is not applied)")
            return False
        if name in _NO_ARGUMENT:
            if name == "final":
                ctx.wants_final_pass = True
            matched = True if name == "all" else ctx.final_pass
            i += 1
        else:
            if i + 1 >= len(args):
                ctx.notes.append(f"{directive.where}: Match {name} needs an argument (the block is not applied)")
                return False
            value, i = args[i + 1], i + 2
            if name == "exec":
                if not result or not evaluate_exec:  # OpenSSH skips exec once an earlier criterion failed
                    continue
                matched = _run_exec(value, directive, ctx)
            else:
                matched = _criterion(name, value, ctx)
        if matched == negated:
            result = False
    return result


def _criterion(name: str, patterns: str, ctx: MatchContext) -> bool:
    if name == "host":
        return match_pattern_list(ctx.host, patterns, lower=True) == 1
    if name == "originalhost":
        return match_pattern_list(ctx.original, patterns) == 1
    if name == "user":
        return match_pattern_list(ctx.user or local_user(), patterns) == 1
    return match_pattern_list(local_user(), patterns) == 1  # localuser


def _run_exec(command: str, directive: Directive, ctx: MatchContext) -> bool:
    try:
        expanded = expand_tokens(command, connection_tokens(ctx.host, ctx.original, ctx.user, ctx.port), "Match exec")
    except TokenError as exc:
        ctx.notes.append(f"{directive.where}: {exc} (the block is not applied)")
        return False
    shell = os.environ.get("SHELL") or "/bin/sh"
    try:
        done = subprocess.run(
            [shell, "-c", expanded],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=EXEC_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        ctx.notes.append(
            f"{directive.where}: Match exec {command!r} ran past {EXEC_TIMEOUT_S:.0f} s (taken as no match)"
        )
        return False
    except OSError as exc:
        ctx.notes.append(f"{directive.where}: Match exec could not start {shell}: {exc.strerror} (taken as no match)")
        return False
    return done.returncode == 0
