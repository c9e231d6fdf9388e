"""Ansible inventories with their variables kept beside them (group_vars/, host_vars/, as files or
directories of files) and inventory directories, through `gpudiag hosts -i`: real
`ansible-inventory -i INV --list` is the oracle for each host's address, port and user."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inventory"
ANSIBLE_INVENTORY = shutil.which("ansible-inventory")
needs_ansible = pytest.mark.skipif(ANSIBLE_INVENTORY is None, reason="ansible-core not installed")
SOURCES = ["vars_dirs/hosts.ini", "vars_dirs", "inventory_dir"]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def ansible_hosts(*args: str) -> dict[str, tuple]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(Path.cwd() / ".ansible-tmp"))
    done = subprocess.run([ANSIBLE_INVENTORY, *args, "--list"], capture_output=True, text=True, timeout=120,
                          check=False, env=env)
    assert done.returncode == 0, done.stderr
    hostvars = json.loads(done.stdout)["_meta"]["hostvars"]
    return {name: (v.get("ansible_host", name), v.get("ansible_port"), v.get("ansible_user"))
            for name, v in hostvars.items()}


def gpudiag_hosts(*args: str) -> dict[str, tuple]:
    result = CliRunner().invoke(cli, ["hosts", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {h["name"]: (h["address"], h["port"], h["user"]) for h in json.loads(result.stdout)}


@needs_ansible
@pytest.mark.parametrize("source", SOURCES)
def test_hosts_equal_ansible_inventory(source):
    path = str(FIXTURES / source)
    expected = ansible_hosts("-i", path)
    assert len(expected) >= 6
    assert gpudiag_hosts("-i", path) == expected


def test_group_vars_all_beats_the_ini_group_vars_and_host_vars_beat_both():
    hosts = gpudiag_hosts("-i", str(FIXTURES / "vars_dirs" / "hosts.ini"))
    assert hosts["gpu-07"] == ("gpu-07", 22, "ops")  # group_vars/all.yml over [all:vars] and nothing else
    assert hosts["gpu-03"] == ("gpu-03", 2222, "gpuops")  # group_vars/gpus/ over group_vars/all
    assert hosts["gpu-02"] == ("10.0.1.2", 22022, "root2")  # host_vars/gpu-02/ (a directory of files)
    assert hosts["gpu-05"] == ("gpu-05", 2205, "gpuops")  # the inventory's host var over group_vars


def test_inventory_directory_ignores_readmes_and_backups():
    hosts = gpudiag_hosts("-i", str(FIXTURES / "inventory_dir"))
    assert "gpu-99" not in hosts and "old-host" not in hosts
    assert hosts["edge-2"] == ("edge-2", 2402, "edgeops")  # a source in a subdirectory, group_vars of the top


@needs_ansible
def test_ansible_cfg_inventory_is_the_default_without_i(tmp_path):
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\ninventory = {FIXTURES / 'inventory_dir'}\n")
    os.chmod(tmp_path, 0o755)  # Ansible ignores ./ansible.cfg in a world-writable directory
    expected = ansible_hosts()
    assert gpudiag_hosts() == expected and "edge-1" in expected


def test_ansible_inventory_env_names_the_default(monkeypatch):
    monkeypatch.setenv("ANSIBLE_INVENTORY", str(FIXTURES / "vars_dirs"))
    assert "spare-4" in gpudiag_hosts()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_vault_and_jinja_values_skip_or_warn_only_the_hosts_they_reach(tmp_path):
    write(tmp_path / "inv" / "hosts.ini", "[gpus]\ng1\ng2\n\n[other]\no1\n")
    write(tmp_path / "inv" / "host_vars" / "g1.yml",
          "ansible_host: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3132\ndb_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  33\n")
    write(tmp_path / "inv" / "host_vars" / "g2.yml", "x: 1\nansible_user: '{{ lookup(\"env\", \"USER\") }}'\n")
    write(tmp_path / "inv" / "group_vars" / "other" / "vault", "$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    result = CliRunner().invoke(cli, ["hosts", "-i", str(tmp_path / "inv"), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    hosts = {h["name"]: h for h in json.loads(result.stdout)}
    g1_vars = tmp_path / "inv" / "host_vars" / "g1.yml"
    assert hosts["g1"]["skip_reason"] == (
        f"{g1_vars}:1: ansible_host is vault-encrypted, which gpudiag does not decrypt")
    assert hosts["g2"]["skip_reason"].startswith(f"{tmp_path / 'inv' / 'host_vars' / 'g2.yml'}:2: ansible_user is a Jinja")
    assert hosts["o1"]["skip_reason"] is None
    vault = tmp_path / "inv" / "group_vars" / "other" / "vault"
    assert f"gpudiag: warning: o1: {vault}:1: vault-encrypted vars file not read" in result.stderr
    assert result.stderr.count("warning") == 3  # g1 and g2 not scanned, o1 warned; nothing else


def test_a_broken_vars_file_skips_only_its_hosts(tmp_path):
    write(tmp_path / "inv" / "hosts.ini", "[gpus]\ng1\n[other]\no1\n")
    write(tmp_path / "inv" / "group_vars" / "gpus.yml", "ansible_port: [unclosed\n")
    result = CliRunner().invoke(cli, ["hosts", "-i", str(tmp_path / "inv"), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    hosts = {h["name"]: h for h in json.loads(result.stdout)}
    assert hosts["g1"]["skip_reason"].startswith(f"{tmp_path / 'inv' / 'group_vars' / 'gpus.yml'}:")
    assert "YAML syntax error" in hosts["g1"]["skip_reason"]
    assert hosts["o1"]["skip_reason"] is None


def test_scripts_and_plugin_configs_in_a_directory_are_skipped_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")   # no ansible-inventory to run them (test_inventory_sources.py)
    write(tmp_path / "inv" / "10-static.ini", "[gpus]\ng1 ansible_host=10.0.0.1\n")
    script = tmp_path / "inv" / "20-cmdb.py"
    write(script, "#!/usr/bin/env python3\nprint('{}')\n")
    script.chmod(0o755)
    write(tmp_path / "inv" / "30-aws_ec2.yml", "# dynamic\nplugin: amazon.aws.aws_ec2\nregions: [us-east-1]\n")
    result = CliRunner().invoke(cli, ["hosts", "-i", str(tmp_path / "inv"), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [h["name"] for h in json.loads(result.stdout)] == ["g1"]
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"gpudiag: warning: inventory source skipped: {script}: an inventory script, not run")
    assert "an inventory plugin configuration (plugin: amazon.aws.aws_ec2), not run" in warnings[1]
    alone = CliRunner().invoke(cli, ["hosts", "-i", str(script)], catch_exceptions=False)
    assert alone.exit_code == 2 and f"{script}: an inventory script, not run" in alone.stderr
