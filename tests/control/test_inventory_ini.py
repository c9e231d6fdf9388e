"""Ansible inventories (INI, and the YAML fixtures too) read as Ansible reads them: `ansible-inventory -i
FILE --list` is the oracle for groups (flattened), host variables and the connection settings gpudiag
takes from them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory import load_inventory, resolve_targets
from gpudiag.inventory.ansible_vars import FIELDS, SECRET_KEYS, WARN_ONLY

INI = Path(__file__).resolve().parents[1] / "fixtures" / "inventory" / "ini"
ANSIBLE_INVENTORY = shutil.which("ansible-inventory")
ORACLE_FILES = ["cluster.ini", "nested.ini", "connections.ini", "plain_hosts.ini", "../ansible.yaml",
                "../ansible_no_all.yaml"]


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


def ansible_list(path: Path) -> dict:
    done = subprocess.run([ANSIBLE_INVENTORY, "-i", str(path), "--list"], capture_output=True, text=True,
                          timeout=120, check=False, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def flattened(listing: dict, group: str) -> set[str]:
    entry = listing.get(group, {})
    hosts = set(entry.get("hosts", []))
    for child in entry.get("children", []):
        hosts |= flattened(listing, child)
    return hosts


@pytest.mark.skipif(ANSIBLE_INVENTORY is None, reason="ansible-core not installed")
@pytest.mark.parametrize("name", ORACLE_FILES)
def test_groups_and_host_settings_equal_ansible_inventory(name):
    listing = ansible_list(INI / name)
    inv = load_inventory(INI / name)
    hostvars = listing["_meta"]["hostvars"]
    assert set(inv.hosts) == set(hostvars) | flattened(listing, "all")
    for group in [g for g in listing if g != "_meta"]:
        assert set(inv.groups[group]) == flattened(listing, group), group
    for host_name, variables in hostvars.items():
        host = inv.hosts[host_name]
        if host.skip_reason or host.container or host.transport == "local":
            continue   # checked by the connection tests below
        assert host.address == variables.get("ansible_host", host_name), host_name
        assert host.port == variables.get("ansible_port"), host_name
        assert host.user == variables.get("ansible_user"), host_name
        assert host.identity_file == variables.get("ansible_ssh_private_key_file"), host_name
        interpreter = variables.get("ansible_python_interpreter", "python3")
        if interpreter.startswith("auto"):   # Ansible's discovery: gpudiag's default interpreter
            interpreter = "python3"
        assert host.python == interpreter, host_name
        if "ansible_ssh_common_args" in variables:
            assert host.jump and host.jump in variables["ansible_ssh_common_args"], host_name
        # settings gpudiag does not honour are notes, and secrets are never kept
        others = {k: v for k, v in variables.items() if k not in FIELDS and k not in WARN_ONLY
                  and not any(word in k for word in SECRET_KEYS)}
        assert dict(host.vars) == others, host_name


def test_values_keep_their_lines():
    inv = load_inventory(INI / "cluster.ini")
    assert inv.hosts["spare"].source == f"{INI / 'cluster.ini'}:7"
    assert dict(inv.hosts["spare"].vars)["gpu_model"] == "H200 SXM"
    assert inv.hosts["gpu-10"].port == 2222


def test_connections_map_to_gpudiag_transports():
    inv = load_inventory(INI / "connections.ini")
    assert inv.hosts["localhost"].transport == "local"
    assert (inv.hosts["sglang-1"].transport, inv.hosts["sglang-1"].container) == ("local", "docker:sglang-1")
    assert inv.hosts["sglang-2"].container == "docker:sglang_server_2"
    assert inv.hosts["pod-a"].container == "kubectl:inference/pod-a"
    assert inv.hosts["gpu-01"].skip_reason is None


def test_settings_gpudiag_cannot_honour_are_named_per_host():
    path = INI / "connections.ini"
    inv = load_inventory(path)
    assert "ansible_connection 'winrm' is not supported" in inv.hosts["winbox"].skip_reason
    assert "Jinja template" in inv.hosts["templated"].skip_reason
    assert inv.hosts["templated"].skip_reason.startswith(f"{path}:")
    assert inv.hosts["become"].skip_reason is None
    assert any("ansible_become" in note for note in inv.notes["become"])
    assert inv.hosts["pw"].skip_reason is None
    assert any("ansible_ssh_pass" in note for note in inv.notes["pw"])
    assert "hunter2" not in repr(inv)   # the password is never kept


def hosts_cli(*args):
    return CliRunner().invoke(cli, ["hosts", *args], env={"COLUMNS": "250"}, catch_exceptions=False)


def test_untargeted_hosts_never_block_and_stay_silent():
    result = hosts_cli("gpus", "-i", str(INI / "connections.ini"), "--json")
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    assert [h["name"] for h in json.loads(result.stdout)] == ["gpu-01", "gpu-02"]


def test_targeted_hosts_warn_once_per_setting():
    result = hosts_cli("oddities", "-i", str(INI / "connections.ini"), "--json")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("gpudiag: warning:")]
    assert len(warnings) == 4, warnings
    assert sum("winbox: not scanned" in w and "winrm" in w for w in warnings) == 1
    assert sum("templated: not scanned" in w for w in warnings) == 1
    assert sum("become:" in w and "ansible_become" in w for w in warnings) == 1
    assert sum("pw:" in w and "ansible_ssh_pass" in w for w in warnings) == 1
    assert "hunter2" not in result.output
    skipped = {h["name"]: h["skip_reason"] for h in json.loads(result.stdout)}
    assert skipped["become"] is None and "winrm" in skipped["winbox"]


def test_pattern_over_an_ini_inventory():
    inv = load_inventory(INI / "cluster.ini")
    assert [h.name for h in resolve_targets(["gpus:!gpu-02:&lab"], inv)] == \
        ["gpu-01", "gpu-03", "gpu-04", "gpu-10", "spare"]
