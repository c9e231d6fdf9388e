"""`gpudiag hosts` (nothing connects) with ssh installed: each host's ssh settings come from `ssh -G`, the
inventory's own values still win, tokens in IdentityFile are expanded; with no ssh on PATH, or where
`ssh -G` refuses the config, gpudiag's own reader resolves the host and the caption says why."""
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAME = "gpu-target"
# `Match originalhost=NAME` (a criterion written with `=`) is beyond gpudiag's own reader: only ssh -G sees port 2299.
CONFIG = f"Match originalhost={NAME}\n  Port 2299\nHost {NAME}\n  HostName 127.0.0.1\n  Port 2300\n"
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")


def gpudiag(tmp_path, *args, config=CONFIG, path=None):
    (tmp_path / "ssh_config").write_text(config)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="300", GPUDIAG_SSH_CONFIG=str(tmp_path / "ssh_config"),
               HOME=pwd.getpwuid(os.getuid()).pw_dir)   # ssh reads `~` as the account's home
    env.pop("GPUDIAG_SSH_SYSTEM_CONFIG", None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "gpudiag", "hosts", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=60)


@needs_ssh
def test_ssh_g_resolves_what_the_own_reader_cannot(tmp_path):
    out = gpudiag(tmp_path, NAME)
    assert out.returncode == 0, out.stderr
    assert "ssh 127.0.0.1:2299" in out.stdout
    assert "resolved by `ssh -G` (OpenSSH_" in out.stdout
    assert "not supported" not in out.stderr


@needs_ssh
def test_inventory_values_still_win_and_identity_tokens_expand(tmp_path):
    (tmp_path / "inventory.yaml").write_text(f"hosts:\n  {NAME}:\n    user: inv\n    port: 2400\n")
    config = CONFIG + f"  User cfg\n  IdentityFile {tmp_path}/key_%h_%r_%p\n"
    out = gpudiag(tmp_path, NAME, "--json", config=config)
    assert out.returncode == 0, out.stderr
    (host,) = json.loads(out.stdout)
    assert (host["address"], host["user"], host["port"]) == ("127.0.0.1", "inv", 2400)
    assert host["identity_file"] == f"{tmp_path}/key_127.0.0.1_inv_2400"


def test_without_ssh_on_path_the_own_reader_resolves_and_says_so(tmp_path):
    bare_bin = tmp_path / "bin"
    bare_bin.mkdir()
    out = gpudiag(tmp_path, NAME, path=str(bare_bin))
    assert out.returncode == 0, out.stderr
    assert "ssh 127.0.0.1:2300" in out.stdout
    assert "resolved by gpudiag's own ssh_config reader: ssh not found" in out.stdout
    assert "Match originalhost=" in out.stderr   # the block it cannot apply is named


@needs_ssh
def test_a_config_ssh_refuses_falls_back_with_ssh_s_reason(tmp_path):
    out = gpudiag(tmp_path, NAME, config=CONFIG + "  NoSuchOptionAnywhere yes\n")
    assert "resolved by gpudiag's own ssh_config reader: ssh -G failed: " in out.stdout, out.stdout + out.stderr
    assert "Bad configuration option: nosuchoptionanywhere" in out.stdout   # ssh's own words, which line
    assert "ssh 127.0.0.1:2300" in out.stdout


@needs_ssh
def test_honoured_host_key_and_timeout_settings_are_not_warned_about(tmp_path):
    config = CONFIG + "  StrictHostKeyChecking accept-new\n  UserKnownHostsFile /dev/null\n  ConnectTimeout 3\n"
    config += f"  IdentityFile {tmp_path}/a\n  IdentityFile {tmp_path}/b\n"
    out = gpudiag(tmp_path, NAME, config=config)
    assert out.returncode == 0, out.stderr
    assert "gpudiag: warning:" not in out.stderr, out.stderr


@needs_ssh
def test_strict_host_key_checking_no_is_named_as_taken_for_accept_new(tmp_path):
    out = gpudiag(tmp_path, NAME, config=CONFIG + "  StrictHostKeyChecking no\n")
    assert out.returncode == 0, out.stderr
    warning = next(line for line in out.stderr.splitlines() if line.startswith(f"gpudiag: warning: {NAME}:"))
    assert "StrictHostKeyChecking no is taken as accept-new (a changed host key is still refused)" in warning


def test_the_own_reader_names_the_settings_only_ssh_g_honours(tmp_path):
    bare_bin = tmp_path / "bin"   # a PATH with Python and no ssh
    bare_bin.mkdir()
    (bare_bin / "python3").symlink_to(sys.executable)
    config = CONFIG + "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  ConnectTimeout 3\n"
    out = gpudiag(tmp_path, NAME, config=config, path=str(bare_bin))
    assert out.returncode == 0, out.stderr
    warning = next(line for line in out.stderr.splitlines() if line.startswith(f"gpudiag: warning: {NAME}:"))
    for label in ("StrictHostKeyChecking", "UserKnownHostsFile", "ConnectTimeout"):
        assert f"{label} is honoured only where ssh -G resolves the host (ignored)" in warning, warning


@needs_ssh
@pytest.mark.parametrize("setting", ["RevokedHostKeys /etc/ssh/revoked_keys", "HostKeyAlias other-name",
                                     "KnownHostsCommand /bin/true"])
def test_a_host_key_setting_gpudiag_does_not_honour_turns_the_configs_accept_new_off(tmp_path, setting,
                                                                                      monkeypatch):
    config = CONFIG + f"  StrictHostKeyChecking accept-new\n  {setting}\n"
    out = gpudiag(tmp_path, NAME, config=config)
    assert out.returncode == 0, out.stderr
    warning = next(line for line in out.stderr.splitlines() if line.startswith(f"gpudiag: warning: {NAME}:"))
    label = setting.split()[0]
    assert f"StrictHostKeyChecking accept-new is not applied: {label} is not honoured" in warning, warning
    assert f"{label} is not supported (ignored)" in warning, warning
    from gpudiag.inventory.ssh_openssh import OpenSsh
    monkeypatch.setenv("HOME", pwd.getpwuid(os.getuid()).pw_dir)
    monkeypatch.delenv("GPUDIAG_SSH_SYSTEM_CONFIG", raising=False)
    openssh, why = OpenSsh.find()
    assert openssh is not None, why
    openssh.config_file = str(tmp_path / "ssh_config")
    settings = openssh.settings(NAME, None, None)
    assert settings.options.accept_new is False      # ssh would check the key under another name or refuse it
    (tmp_path / "ssh_config").write_text(CONFIG + "  StrictHostKeyChecking accept-new\n")
    openssh._answers.clear()
    assert openssh.settings(NAME, None, None).options.accept_new is True
