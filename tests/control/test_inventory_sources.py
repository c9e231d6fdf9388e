"""Inventory sources gpudiag does not read itself, read as Ansible reads them: an inventory script and an
inventory plugin's configuration through the real `ansible-inventory` (where ansible-core is installed), and a
host list (`-i 'h1,h2:2200,'`) as Ansible's host_list plugin reads it; through `gpudiag hosts`."""
import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

ANSIBLE = shutil.which("ansible-inventory")
needs_ansible = pytest.mark.skipif(ANSIBLE is None, reason="ansible-core (ansible-inventory) is not installed")
SCRIPT = """#!/usr/bin/env python3
import json, sys
if "--host" in sys.argv:
    print("{}")
else:
    print(json.dumps({"gpus": {"hosts": ["gpu-a", "gpu-b"], "vars": {"ansible_user": "ops"}},
                      "_meta": {"hostvars": {"gpu-a": {"ansible_host": "10.1.0.1", "ansible_port": 2222},
                                             "gpu-b": {"ansible_host": "10.1.0.2"}}}}))
"""
GENERATOR = """plugin: ansible.builtin.generator
hosts:
  name: "gpu-{{ n }}"
  parents:
    - name: gpus
layers:
  n: ["01", "02"]
"""


def hosts(source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no-ssh-config"))
    result = CliRunner().invoke(cli, ["hosts", "-i", str(source), "--json"])
    assert result.exit_code == 0, result.output
    return {h["name"]: h for h in json.loads(result.stdout)}


def ansible_list(source):
    """{host: its variables} as `ansible-inventory --list` gives them (hosts without variables included)."""
    proc = subprocess.run([ANSIBLE, "-i", str(source), "--list"], capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout)
    names = {h for group in doc.values() if isinstance(group, dict) for h in group.get("hosts", [])}
    return {name: doc["_meta"]["hostvars"].get(name, {}) for name in names}


@needs_ansible
def test_an_inventory_script_is_what_ansible_inventory_lists(tmp_path, monkeypatch):
    script = tmp_path / "cmdb.py"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    found = hosts(script, tmp_path, monkeypatch)
    theirs = ansible_list(script)
    assert sorted(found) == sorted(theirs) == ["gpu-a", "gpu-b"]
    for name, host in found.items():
        assert (host["address"], host["user"], host["port"]) == (
            theirs[name]["ansible_host"], theirs[name]["ansible_user"], theirs[name].get("ansible_port"))
    assert found["gpu-a"]["groups"] == ["gpus"]
    assert found["gpu-a"]["source"].startswith(f"{script} (through ansible-inventory):")


@needs_ansible
def test_an_inventory_plugin_runs_through_ansible(tmp_path, monkeypatch):
    config = tmp_path / "fleet.yml"
    config.write_text(GENERATOR)
    found = hosts(config, tmp_path, monkeypatch)
    assert sorted(found) == sorted(ansible_list(config)) == ["gpu-01", "gpu-02"]
    assert found["gpu-02"]["groups"] == ["gpus"]


@needs_ansible
def test_a_plugin_ansible_cannot_run_is_an_error_naming_both_reasons(tmp_path, monkeypatch):
    config = tmp_path / "aws_ec2.yml"
    config.write_text("plugin: not.a.real.plugin_name\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["hosts", "-i", str(config)])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\\n" not in line and "an inventory plugin configuration (plugin: not.a.real.plugin_name)" in line
    assert "ansible-inventory failed:" in line


def test_a_host_list_is_read_as_ansible_reads_it(tmp_path, monkeypatch):
    found = hosts("h1,h2:2200,", tmp_path, monkeypatch)
    assert [(h["address"], h["port"]) for h in found.values()] == [("h1", None), ("h2", 2200)]
    assert found["h2"]["source"] == "h1,h2:2200, (host list):4"


def test_without_ansible_a_script_says_how_to_export_it(tmp_path, monkeypatch):
    script = tmp_path / "cmdb.py"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(cli, ["hosts", "-i", str(script)])
    assert result.exit_code == 2
    assert "an inventory script, not run" in result.output and "ansible-inventory is not installed" in result.output
