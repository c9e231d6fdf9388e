"""OpenSSH is the oracle: for every config in tests/fixtures/sshconfig/ and every host its first line
names (`# oracle-hosts: host user@host ...`), gpudiag's HostName, User, Port, IdentityFile and ProxyJump
equal what `ssh -G -F CONFIG HOST` prints. HOME is a temp copy of tests/fixtures/sshconfig/home, so
`~` and relative Include paths resolve the same way for both."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.inventory.sshconfig import SshConfig
from gpudiag.inventory.sshconfig_match import local_user

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "sshconfig"
CONFIGS = sorted(CORPUS.glob("*.conf"))
SSH = shutil.which("ssh")
FIELDS = ("hostname", "user", "port", "identityfile", "proxyjump")

pytestmark = pytest.mark.skipif(SSH is None, reason="OpenSSH client (ssh) not installed")


def oracle_hosts(config: Path) -> list[tuple[str | None, str]]:
    first = config.read_text().splitlines()[0]
    assert first.startswith("# oracle-hosts:"), f"{config.name}: first line must list the hosts to check"
    out = []
    for word in first.split(":", 1)[1].split():
        user, _, host = word.rpartition("@")
        out.append((user or None, host))
    return out


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    shutil.copytree(CORPUS / "home", home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    return home


def ssh_g(config: Path, host: str, user: str | None, home: Path) -> dict[str, list[str]]:
    argv = [SSH, "-G", "-F", str(config)] + (["-l", user] if user else []) + [host]
    env = dict(os.environ, HOME=str(home), SHELL="/bin/sh")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=30, check=False)
    assert done.returncode == 0, f"ssh -G failed for {host}: {done.stderr}"
    values: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in FIELDS:
            values.setdefault(key, []).append(value)
    return values


def gpudiag_view(config: Path, host: str, user: str | None) -> dict[str, list[str]]:
    found = SshConfig(config).lookup(host, user=user)
    # ssh -G prints its defaults where nothing is set: the local user, port 22, the default keys.
    return {"hostname": [found.hostname], "user": [found.user or local_user()],
            "port": [str(found.port or 22)], "identityfile": list(found.identity_files),
            "proxyjump": [found.proxy_jump] if found.proxy_jump else []}


def without_default_keys(values: dict[str, list[str]]) -> list[str]:
    keys = values.get("identityfile", [])
    if keys and all(k.startswith("~/.ssh/id_") and "%" not in k for k in keys) and len(keys) > 3:
        return []   # OpenSSH's built-in list, printed when no IdentityFile is configured
    return keys


CASES = [(config, user, host) for config in CONFIGS for user, host in oracle_hosts(config)]


def test_the_corpus_is_large_enough():
    assert len(CONFIGS) >= 20
    assert len(CASES) >= 60


@pytest.mark.parametrize("config,user,host", CASES,
                         ids=[f"{c.stem}:{(u + '@') if u else ''}{h}" for c, u, h in CASES])
def test_resolution_equals_ssh_G(config, user, host, home):
    expected = ssh_g(config, host, user, home)
    mine = gpudiag_view(config, host, user)
    assert mine["hostname"] == expected["hostname"]
    assert mine["user"] == expected["user"]
    assert mine["port"] == expected["port"]
    assert mine["identityfile"] == without_default_keys(expected)
    assert mine["proxyjump"] == expected.get("proxyjump", [])


def test_match_exec_runs_through_the_users_shell(home, tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    shell = tmp_path / "shell"
    shell.write_text(f"#!/bin/sh\necho \"$2\" >> {marker}\nexec /bin/sh \"$@\"\n")
    shell.chmod(0o755)
    monkeypatch.setenv("SHELL", str(shell))
    config = tmp_path / "config"
    config.write_text('Match exec "test %n = x"\n  User viashell\n')
    assert SshConfig(config).lookup("x").user == "viashell"
    assert marker.read_text().strip() == "test x = x"


def test_cli_hosts_use_the_resolved_settings(home, tmp_path):
    """`gpudiag hosts --json` over the whole corpus: the Host it builds carries ssh -G's values."""
    for config in CONFIGS:
        cases = [(u, h) for u, h in oracle_hosts(config)]
        cases = [(u, h) for u, h in cases if "[" not in h]   # a bracket is a host pattern on the command line
        targets = [f"{u}@{h}" if u else h for u, h in cases]
        env = dict(os.environ, HOME=str(home), SHELL="/bin/sh", GPUDIAG_SSH_CONFIG=str(config),
                   PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        done = subprocess.run([sys.executable, "-m", "gpudiag", "hosts", "--json", *targets], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=60, check=False)
        assert done.returncode == 0, f"{config.name}: {done.stderr}"
        built = json.loads(done.stdout)
        assert len(built) == len(set(targets))
        for (user, host), entry in zip(dict.fromkeys(cases), built):
            expected = ssh_g(config, host, user, home)
            assert entry["address"] == expected["hostname"][0], (config.name, host)
            assert (entry["user"] or local_user()) == expected["user"][0], (config.name, host)
            assert str(entry["port"] or 22) == expected["port"][0], (config.name, host)
            keys = without_default_keys(expected)
            if keys and "%" not in keys[0]:
                assert entry["identity_file"] == os.path.expanduser(keys[0]), (config.name, host)
