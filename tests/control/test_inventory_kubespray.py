"""kubespray's sample inventory (tests/fixtures/inventory/kubespray_sample, fetched unchanged, SOURCE.md gives
its URL) with its six hosts uncommented as a user does: gpudiag reads its group_vars files that hold only `---`
and comments as empty, as Ansible does, and resolves the six hosts `ansible-inventory --list` lists."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory import load_inventory

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "inventory" / "kubespray_sample"


@pytest.fixture
def sample(tmp_path):
    target = tmp_path / "inventory" / "mycluster"
    shutil.copytree(SAMPLE / "group_vars", target / "group_vars")
    text = (SAMPLE / "inventory.ini").read_text()
    (target / "inventory.ini").write_text(re.sub(r"^# (node\d ansible_host)", r"\1", text, flags=re.M))
    return target / "inventory.ini"


def test_the_sample_has_comment_only_vars_files_with_a_document_marker():
    emptied = [p for p in (SAMPLE / "group_vars").rglob("*.yml")
               if p.read_text().lstrip().startswith("---")
               and all(not line.strip() or line.lstrip().startswith("#") or line.strip() == "---"
                       for line in p.read_text().splitlines())]
    assert len(emptied) >= 2, emptied


def test_all_six_hosts_resolve_through_the_cli(sample, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["hosts", "-i", str(sample), "--json"])
    assert result.exit_code == 0, result.output
    hosts = {h["name"]: h for h in json.loads(result.stdout)}
    assert sorted(hosts) == ["node1", "node2", "node3", "node4", "node5", "node6"]
    assert all(h["skip_reason"] is None for h in hosts.values()), [h["skip_reason"] for h in hosts.values()]
    assert hosts["node1"]["address"] == "95.54.0.12" and hosts["node6"]["address"] == "95.54.0.17"
    assert sorted(hosts["node2"]["groups"]) == ["etcd", "kube_control_plane"]


def test_a_vars_file_error_names_its_path_unchanged(tmp_path):
    folder = tmp_path / "inventory" / "prod"   # a path with `inventory` in it, as kubespray's
    (folder / "group_vars").mkdir(parents=True)
    (folder / "group_vars" / "all.yml").write_text("---\n- a list\n")
    (folder / "inventory.ini").write_text("[gpus]\ngpu-01\n")
    host = load_inventory(folder / "inventory.ini").hosts["gpu-01"]
    assert f"{folder}/group_vars/all.yml:2: the vars file must be a mapping" in host.skip_reason


def test_the_same_hosts_as_ansible_inventory(sample):
    if shutil.which("ansible-inventory") is None:
        pytest.skip("ansible-inventory is not installed")
    proc = subprocess.run(["ansible-inventory", "-i", str(sample), "--list"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    hostvars = json.loads(proc.stdout)["_meta"]["hostvars"]
    ours = load_inventory(sample).hosts
    assert sorted(ours) == sorted(hostvars)
    assert {n: h.address for n, h in ours.items()} == {n: v["ansible_host"] for n, v in hostvars.items()}
