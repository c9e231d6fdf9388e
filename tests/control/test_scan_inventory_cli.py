"""Scans through the CLI with the inventories users already have: an Ansible INI file as it is
(`ansible_connection=local` hosts here; tests/integration/test_scan_ansible_ini.py does ssh), ranges and
patterns as targets, --limit, and a broken ./inventory.yaml next to ad-hoc targets."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

FAST = ("--probes", "env", "--set", "env.torch=false")
INI = f"""# Ansible's default `hosts` file form, unchanged
[gpus]
box1 ansible_connection=local
box2 ansible_connection=local ansible_python_interpreter={sys.executable}

[windows]
winbox ansible_connection=winrm ansible_host="{{{{ lookup('env', 'WIN_HOST') }}}}"

[gpus:vars]
gpu_model=H200
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))
    monkeypatch.chdir(tmp_path)


def scan(*args: str) -> tuple:
    result = CliRunner().invoke(cli, ["scan", *args, *FAST, "--json", "--reports-dir", "reports"],
                                catch_exceptions=False)
    return result, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else None)


def test_an_ansible_ini_inventory_scans_with_no_changes(tmp_path):
    (tmp_path / "hosts").write_text(INI)
    result, manifest = scan("gpus", "-i", "hosts")
    assert result.exit_code == 0, result.output
    assert sorted((h["name"], h["status"]) for h in manifest["hosts"]) == [("box1", "ok"), ("box2", "ok")]
    assert "winbox" not in result.output   # not targeted: neither blocks nor warns
    stored = json.loads(next(Path("reports/runs").glob("*/hosts/box2.json")).read_text())
    assert stored["python"] == sys.executable


def test_a_targeted_host_gpudiag_cannot_reach_correctly_is_skipped_with_the_reason(tmp_path):
    (tmp_path / "hosts").write_text(INI)
    result, manifest = scan("all", "-i", "hosts")
    assert result.exit_code == 3, result.output
    statuses = {h["name"]: (h["status"], h["reason"]) for h in manifest["hosts"]}
    assert statuses["box1"][0] == "ok" and statuses["box2"][0] == "ok"
    status, reason = statuses["winbox"]
    assert status == "unreachable" and reason.startswith("not scanned: hosts:")
    assert "ansible_connection 'winrm' is not supported" in reason and "Jinja template" in reason
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "winbox: not scanned" in warnings[0]


def test_patterns_and_limit_select_hosts_for_a_scan(tmp_path):
    (tmp_path / "hosts").write_text(INI)
    result, manifest = scan("all:!windows", "-i", "hosts", "--limit", "box*:!box1")
    assert result.exit_code == 0, result.output
    assert [h["name"] for h in manifest["hosts"]] == ["box2"]
    result, manifest = scan("-i", "hosts", "--limit", "box1")   # --limit alone: from `all`, as Ansible
    assert result.exit_code == 0, result.output
    assert [h["name"] for h in manifest["hosts"]] == ["box1"]


def test_unexpandable_range_is_a_one_line_usage_error(tmp_path):
    result, _ = scan("gpu-[01:xx]")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [("gpudiag: error: host range 'gpu-[01:xx]': cannot expand [01:xx] "
                      "(expected [01-03,07] or [01:08])")]


def test_broken_default_inventory_only_warns_for_adhoc_targets(tmp_path):
    (tmp_path / "inventory.yaml").write_text("hosts:\n  a: [\n")
    result, manifest = scan("localhost")
    assert result.exit_code == 0, result.output
    assert manifest["hosts"][0]["status"] == "ok"
    warning = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warning == [("gpudiag: warning: inventory.yaml not used: inventory.yaml:2: YAML syntax error: "
                        "expected the node content, but found '<stream end>'")]


def test_broken_inventory_named_by_i_is_an_error(tmp_path):
    (tmp_path / "inventory.yaml").write_text("hosts:\n  a: [\n")
    result, _ = scan("localhost", "-i", "inventory.yaml")
    assert result.exit_code == 2
    assert "inventory.yaml:2: YAML syntax error" in result.output


def test_limit_is_offered_by_scan_hosts_and_repro():
    for command in (["scan"], ["hosts"], ["repro", "cuda-graph-crash"]):
        result = CliRunner().invoke(cli, [*command, "--help"])
        assert "--limit PATTERN" in result.output, command


def test_a_malformed_host_in_gpudiags_form_is_skipped_and_the_others_scan(tmp_path):
    (tmp_path / "inventory.yaml").write_text(
        "hosts:\n  localhost:\n  broken:\n    adress: 10.0.0.1\n")
    result, manifest = scan("all")
    assert result.exit_code == 3, result.output
    statuses = {h["name"]: (h["status"], h["reason"]) for h in manifest["hosts"]}
    assert statuses["localhost"][0] == "ok"
    assert statuses["broken"][0] == "unreachable"
    assert statuses["broken"][1].startswith("not scanned: inventory.yaml:4: host 'broken': unknown key 'adress'")
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [f"gpudiag: warning: broken: {statuses['broken'][1]}"]
    alone, _ = scan("localhost")   # the other host runs on its own with no word about the broken one
    assert alone.exit_code == 0 and "broken" not in alone.stderr
