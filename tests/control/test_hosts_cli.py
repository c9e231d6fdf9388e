"""`gpudiag hosts` (and scan's use of inventories) through the CLI: table, JSON, errors, the repo's
example inventory.yaml."""
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory import load_inventory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "inventory")
NATIVE = os.path.join(FIXTURES, "gpudiag.yaml")
ANSIBLE = os.path.join(FIXTURES, "ansible.yaml")
REPO_INVENTORY = os.path.join(ROOT, "inventory.yaml")


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


def invoke(*args, columns="250"):
    return CliRunner().invoke(cli, ["hosts", *args], env={"COLUMNS": columns}, catch_exceptions=False)


def test_table_shows_route_python_groups_and_definition():
    result = invoke("gpu-02", "localhost", "-i", NATIVE)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "gpu-02" in line)
    assert "ssh ops@10.0.0.12:2222 via jumper@bastion.example.com:2200 → docker exec sglang" in row
    assert "/opt/sglang/.venv/bin/python" in row and "gpus,h100" in row and "gpudiag.yaml:15" in row
    local = next(line for line in result.output.splitlines() if "localhost" in line)
    assert "local child process" in local and "python3 (default)" in local
    assert "no_ssh_config (absent)" in result.output


def test_json_lists_every_host_when_no_target_is_given():
    result = invoke("-i", ANSIBLE, "--json")
    assert result.exit_code == 0, result.output
    hosts = json.loads(result.output)
    assert [h["name"] for h in hosts] == load_inventory(ANSIBLE).groups["all"]  # in Ansible's order
    node1 = next(h for h in hosts if h["name"] == "node1")
    assert node1["route"] == "ssh gpuops@10.1.0.1:2222"
    assert node1["source"] == f"{ANSIBLE}:17" and node1["groups"] == ["gpus"]


def test_python_override_is_shown_for_every_host():
    hosts = json.loads(invoke("gpus", "-i", NATIVE, "--json", "--python", "/venv/bin/python").output)
    assert {(h["python"], h["python_explicit"]) for h in hosts} == {("/venv/bin/python", True)}


def test_adhoc_targets_without_inventory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # no inventory.yaml here
    hosts = json.loads(invoke("alice@gpu-9:2200", "[::1]:22", "--json").output)
    assert [h["route"] for h in hosts] == ["ssh alice@gpu-9:2200", "ssh [::1]:22"]
    assert all(h["source"] == "command line" for h in hosts)


def test_default_inventory_in_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "inventory.yaml").write_text("hosts:\n  box-1:\n    address: 10.3.0.1\n")
    monkeypatch.chdir(tmp_path)
    hosts = json.loads(invoke("--json").output)
    assert [(h["name"], h["address"]) for h in hosts] == [("box-1", "10.3.0.1")]


def test_bad_inventory_exits_2_with_one_line_naming_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  gpu-01:\n    port: 22\n  gpu-01:\n")
    result = invoke("-i", str(bad))
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{bad}:4:" in lines[0] and "duplicate key 'gpu-01'" in lines[0]


def test_one_malformed_host_is_skipped_with_file_line_and_the_others_resolve(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  gpu-01:\n    port: twenty-two\n  gpu-02:\n    address: 10.0.0.2\n")
    result = invoke("-i", str(inv), "--json")
    assert result.exit_code == 0, result.output
    by_name = {h["name"]: h for h in json.loads(result.stdout)}
    assert by_name["gpu-02"]["skip_reason"] is None and by_name["gpu-02"]["address"] == "10.0.0.2"
    assert by_name["gpu-01"]["skip_reason"].startswith(f"{inv}:3: host 'gpu-01': port must be an integer")
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith(f"gpudiag: warning: gpu-01: not scanned: {inv}:3:")
    other = invoke("gpu-02", "-i", str(inv), "--json")   # not targeted: neither blocks nor warns
    assert other.exit_code == 0 and other.stderr == "" and len(json.loads(other.stdout)) == 1


def test_typo_target_exits_2_with_suggestion():
    result = invoke("gpu-0l", "-i", NATIVE)
    assert result.exit_code == 2
    assert "did you mean gpu-01" in result.stderr and "Traceback" not in result.output


def test_subprocess_json_and_error_forms(tmp_path):
    env = dict(os.environ, GPUDIAG_SSH_CONFIG=str(tmp_path / "none"), COLUMNS="200")
    run = [sys.executable, "-m", "gpudiag", "hosts"]
    ok = subprocess.run(run + ["-i", "inventory.yaml", "--json"], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert [(h["name"], h["transport"]) for h in json.loads(ok.stdout)] == [("localhost", "local")]
    bad = tmp_path / "cycle.yaml"
    bad.write_text("hosts:\n  a:\ngroups:\n  x: [y]\n  y: [x]\n")
    err = subprocess.run(run + ["-i", str(bad)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert err.returncode == 2
    assert re.fullmatch(rf"gpudiag: error: {re.escape(str(bad))}:\d+: groups form a cycle: .*\n", err.stderr)


def test_repo_inventory_commented_examples_load_when_uncommented(tmp_path):
    """The commented examples in inventory.yaml stay valid: uncomment every `key:` line and load it."""
    lines = []
    for line in open(REPO_INVENTORY, encoding="utf-8"):
        example = re.match(r"^(\s*)# ?(\s*[\w\[\]:.-]+:(?: |$).*)$", line.rstrip("\n"))
        if example:
            lines.append(example.group(1) + example.group(2))
        elif not line.lstrip().startswith("#"):
            lines.append(line.rstrip("\n"))
    full = tmp_path / "inventory.yaml"
    full.write_text("\n".join(lines) + "\n")
    inv = load_inventory(full)
    assert {"localhost", "bastion", "gpu-01", "gpu-02", "pod-a", "gpu-03", "gpu-08"} <= set(inv.hosts)
    assert inv.hosts["gpu-01"].jump == "jumper@bastion.example.com:22"
    assert inv.groups["gpus"] == ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]


def test_scan_localhost_with_the_repo_inventory(tmp_path):
    result = CliRunner().invoke(cli, ["scan", "localhost", "-i", REPO_INVENTORY, "--probes", "env", "--json",
                                      "--reports-dir", str(tmp_path / "reports")])
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    assert [(h["name"], h["status"]) for h in manifest["hosts"]] == [("localhost", "ok")]
