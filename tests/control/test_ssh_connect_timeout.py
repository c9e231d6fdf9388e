"""ConnectTimeout from a host's ssh config (as `ssh -G` resolves it) is the connect timeout unless
--connect-timeout is given: the command line wins, then the config, then 10 s."""
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.inventory.ssh_openssh import use_openssh
from gpudiag.inventory.sshconfig import SshConfig
from gpudiag.models import Host
from gpudiag.ssh_options import SshOptions
from gpudiag.transports.ssh import SSHTransport

ROOT = Path(__file__).resolve().parents[2]
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")


def timeout_of(options, **kw):
    host = Host(name="t", address="127.0.0.1", port=2200, transport="ssh", ssh=options)
    return SSHTransport(host, known_hosts="/nonexistent/kh", **kw)._connector.connect_timeout


def test_the_command_line_wins_then_the_config_then_ten_seconds():
    assert timeout_of(SshOptions(connect_timeout=3.0), connect_timeout=7.0) == 7.0
    assert timeout_of(SshOptions(connect_timeout=3.0), connect_timeout=None) == 3.0
    assert timeout_of(SshOptions(connect_timeout=3.0)) == 3.0
    assert timeout_of(SshOptions()) == 10.0
    assert timeout_of(None) == 10.0


@needs_ssh
@pytest.mark.parametrize("written, expected", [("ConnectTimeout 3", 3.0), ("ConnectTimeout 0", None), ("", None)])
def test_ssh_g_s_connect_timeout_reaches_the_settings(tmp_path, monkeypatch, written, expected):
    (tmp_path / "config").write_text(f"Host box\n  HostName 127.0.0.1\n  {written}\n")
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", pwd.getpwuid(os.getuid()).pw_dir)
    monkeypatch.delenv("GPUDIAG_SSH_SYSTEM_CONFIG", raising=False)
    config = SshConfig()
    use_openssh(config)
    settings = config.lookup("box")
    assert settings.resolved_by.startswith("`ssh -G`"), settings.resolved_by
    assert settings.options is not None and settings.options.connect_timeout == expected



def scan(tmp_path, port, *args):
    (tmp_path / "config").write_text(f"Host box\n  HostName 127.0.0.1\n  Port {port}\n  ConnectTimeout 1\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUDIAG_SSH_CONFIG=str(tmp_path / "config"),
               GPUDIAG_KNOWN_HOSTS=str(tmp_path / "kh"), HOME=pwd.getpwuid(os.getuid()).pw_dir)
    env.pop("GPUDIAG_SSH_SYSTEM_CONFIG", None)
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "box", "--probes", "env", "--json",
                           "--reports-dir", str(reports), "--timeout", "30", *args],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    run_dir = reports / "runs" / json.loads(proc.stdout)["run_id"]
    return json.loads((run_dir / "hosts" / "box.json").read_text())["reason"]


@needs_ssh
def test_scan_uses_the_configs_connect_timeout_unless_the_flag_is_given(tmp_path, silent_port):
    assert "sent no SSH banner within 1 s" in scan(tmp_path, silent_port)
    assert "sent no SSH banner within 2 s" in scan(tmp_path, silent_port, "--connect-timeout", "2")
