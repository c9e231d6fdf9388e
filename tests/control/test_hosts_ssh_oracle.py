"""`gpudiag hosts` asks OpenSSH (`ssh -G`) about the hosts the ssh config alone decides and says whether it
agrees: the real ssh on a config with Include, Match and tokens; a stand-in ssh that answers otherwise, to show
a difference is a warning naming the setting; not asked where Match exec would run a command twice."""
import os
import shutil
import stat

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

CONFIG = """Include {dir}/more.conf
Host alpha
    HostName 10.9.8.7
    Port 2222
Match originalhost beta
    HostName %h.example.org
    User deploy
"""


@pytest.fixture
def config(tmp_path, monkeypatch):
    (tmp_path / "more.conf").write_text("Host gamma\n    User gam\n    Port 2200\n")
    path = tmp_path / "config"
    path.write_text(CONFIG.format(dir=tmp_path))
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return path


def hosts(*targets):
    return CliRunner().invoke(cli, ["hosts", *targets], env={"COLUMNS": "300"})


@pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client (ssh) not installed")
def test_openssh_agrees_and_the_table_says_so(config):
    result = hosts("alpha", "beta", "gamma", "10.0.0.5", "ops@alpha:2200")
    assert result.exit_code == 0, result.output
    assert "ssh -G agrees on 4 of 4" in " ".join(result.output.split())  # ops@alpha:2200: not the config's alone
    assert "warning" not in result.stderr


def test_a_difference_is_a_warning_naming_the_setting(config, tmp_path, monkeypatch):
    stub = tmp_path / "bin" / "ssh"
    stub.parent.mkdir()
    stub.write_text("#!/bin/sh\nprintf 'hostname 10.9.8.7\\nuser someone\\nport 2222\\n'\n")
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(stub.parent) + os.pathsep + os.environ["PATH"])
    result = hosts("alpha")
    assert result.exit_code == 0, result.output
    assert "ssh -G agrees on 0 of 1" in " ".join(result.output.split())
    assert "gpudiag: warning: alpha: user is " in result.stderr and ", someone for ssh -G" in result.stderr


def test_match_exec_is_not_run_a_second_time(config, tmp_path):
    marks = tmp_path / "marks"
    config.write_text(f'Match exec "echo %n >> {marks}"\n    User x\n')
    result = hosts("alpha")
    assert result.exit_code == 0, result.output
    assert marks.read_text().split() == ["alpha"] and "ssh -G agrees" not in result.output
