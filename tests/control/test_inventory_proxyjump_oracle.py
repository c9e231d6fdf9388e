"""ProxyJump chains as OpenSSH follows them, with OpenSSH itself as the oracle. For each host, a real
`ssh -v` prints the proxy commands it runs (`exec ssh -l U -p P -J HOPS -W [host]:port HOP`), one per hop,
and fails at once (every name in the config ends in .invalid); `ssh -G` on each of those gives the hop's
address, user and port. gpudiag's route (`gpudiag hosts --json`) must be the same hops in the same order:
each hop resolved with its own configuration, the command line's `-J` beating a hop's own ProxyJump,
`none`, and `%h %n %p %r` in jump values."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory.sshconfig_match import local_user

CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "sshjump" / "chains.conf"
SSH = shutil.which("ssh")
HOSTS = ["dest", "chain", "chain3", "direct", "deep", "tokens", "j1", "plain"]
_PROXY = re.compile(r"Executing proxy command: exec (.*)$")

pytestmark = pytest.mark.skipif(SSH is None, reason="OpenSSH client (ssh) not installed")


def bounded(argv: list[str]) -> str:
    """Runs ssh in its own session and kills the whole session afterwards: the proxy commands it starts
    never outlive the test."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True, env=dict(os.environ, HOME=os.environ["HOME"]))
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return out


def resolved(words: list[str]) -> tuple[str, str, int]:
    """(address, user, port) of the hop a proxy command connects to, as `ssh -G` resolves it."""
    options = [w for i, w in enumerate(words) for flag in ("-l", "-p") if flag in (w, words[i - 1]) and i > 0]
    out = bounded([SSH, "-G", "-F", str(CONFIG), *options, words[-1]])
    values = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return values["hostname"], values["user"], int(values["port"])


def openssh_route(host: str) -> list[tuple[str, str, int]]:
    out = bounded([SSH, "-v", "-F", str(CONFIG), "-o", "BatchMode=yes", "-o", "ConnectTimeout=1", host, "true"])
    commands = [shlex.split(m.group(1)) for line in out.splitlines() if (m := _PROXY.search(line))]
    return [resolved(words) for words in reversed(commands)]   # the last proxy command reaches the first hop


def gpudiag_route(host: str) -> list[tuple[str, str, int]]:
    result = CliRunner().invoke(cli, ["hosts", host, "--json"], env={"GPUDIAG_SSH_CONFIG": str(CONFIG)},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    jump = json.loads(result.stdout)[0]["jump"]
    route = []
    for hop in (jump or "").split(","):
        if hop:
            user, _, rest = hop.rpartition("@")
            address, _, port = rest.partition(":")
            route.append((address, user or local_user(), int(port or 22)))
    return route


@pytest.mark.parametrize("host", HOSTS)
def test_route_equals_openssh(host):
    expected = openssh_route(host)
    assert gpudiag_route(host) == expected


def test_the_oracle_sees_the_chains_it_is_meant_to():
    assert [a for a, _, _ in openssh_route("chain")] == ["bastion.invalid", "j1.invalid", "j2.invalid"]
    assert openssh_route("dest")[-1] == ("jump-dest.invalid", "alice", 2200)   # %r@jump-%h:2200
    assert openssh_route("direct") == []
