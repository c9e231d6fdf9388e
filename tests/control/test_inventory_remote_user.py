"""ansible.cfg's `remote_user` (and ANSIBLE_REMOTE_USER) is the login of every Ansible host whose variables name
no ansible_user, as Ansible logs in; checked through `gpudiag hosts` and, where ansible-core is installed,
against `ansible-config dump`'s DEFAULT_REMOTE_USER."""
import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory.ansible_sources import remote_user


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "ansible.cfg").write_text("[defaults]\nremote_user = deploy\ninventory = hosts.ini\n")
    (tmp_path / "hosts.ini").write_text("[gpus]\ngpu-01 ansible_host=10.0.0.1\n"
                                        "gpu-02 ansible_host=10.0.0.2 ansible_user=root\n"
                                        "box ansible_connection=docker\n")
    monkeypatch.chdir(tmp_path)
    tmp_path.chmod(0o755)                      # Ansible ignores ./ansible.cfg in a world-writable directory
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_REMOTE_USER", "ANSIBLE_INVENTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no-ssh-config"))
    return tmp_path


def users():
    result = CliRunner().invoke(cli, ["hosts", "all", "--json"])
    assert result.exit_code == 0, result.output
    assert "ansible_user" not in result.stderr          # the docker host gets no user to complain about
    return {h["name"]: h["user"] for h in json.loads(result.stdout)}


def test_remote_user_is_the_login_where_the_host_names_none(project):
    assert users() == {"gpu-01": "deploy", "gpu-02": "root", "box": None}


def test_the_environment_wins_over_ansible_cfg(project, monkeypatch):
    monkeypatch.setenv("ANSIBLE_REMOTE_USER", "ops")
    assert users()["gpu-01"] == "ops"


def test_the_same_user_as_ansible_config(project, monkeypatch):
    if shutil.which("ansible-config") is None:
        pytest.skip("ansible-core is not installed")
    for env in ({}, {"ANSIBLE_REMOTE_USER": "ops"}):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        out = subprocess.run(["ansible-config", "dump", "--only-changed"], capture_output=True, text=True,
                             timeout=120, cwd=project).stdout
        theirs = re.search(r"^DEFAULT_REMOTE_USER\(.*?\) = (.*)$", out, re.M).group(1)
        assert remote_user() == theirs
