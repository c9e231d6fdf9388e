"""contrib/ansible/gpudiag-scan.yml run with ansible-playbook's default callback against the loopback sshd
fleet, each host's output saved in gpudiag_output_dir and that directory ingested: the same facts as a
direct scan, and the hosts without a frame (one down, one without the interpreter) reported with Ansible's
own words. (The json callback's form is covered in test_engines_fleet.py.)"""
import shutil

import pytest
import yaml

from tests.integration import test_engines_fleet as fleet_tests
from tests.integration.test_engines_fleet import (
    DOWN,
    FLEET_HOSTS,
    PLAYBOOK,
    ansible_env,
    assert_same_as_direct,
    closed_port,
    ingest,
    run_engine,
)

direct = fleet_tests.direct   # the fixture: a direct scan of the fleet and the bundle the engines run
NO_PYTHON = "nopython"


def inventory(sshd_fleet, work):
    """The fleet, a host whose gpudiag_python does not exist, and a host nobody listens for."""
    path = sshd_fleet.write_inventory(work / "playbook-inventory.yaml", FLEET_HOSTS, form="ansible",
                                      variants={NO_PYTHON: ("h1", {"gpudiag_python": "/opt/none/bin/python3"})})
    doc = yaml.safe_load(path.read_text())
    address, port = closed_port()
    doc["all"]["hosts"][DOWN] = {"ansible_host": address, "ansible_port": port, "ansible_user": "root"}
    doc["all"]["vars"] = {"ansible_ssh_common_args": f"-o UserKnownHostsFile={sshd_fleet.known_hosts} "
                                                     "-o StrictHostKeyChecking=yes"}
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.skipif(shutil.which("ansible-playbook") is None,
                    reason="ansible-core is not installed (pip install ansible-core)")
def test_playbook_default_callback_output_dir(sshd_fleet, direct):
    work = direct["work"]
    saved = work / "playbook-default-out"
    env = ansible_env(sshd_fleet, ANSIBLE_STDOUT_CALLBACK="default")
    proc = run_engine(["ansible-playbook", "-i", str(inventory(sshd_fleet, work)), str(PLAYBOOK),
                       "-e", f"gpudiag_bundle={direct['bundle']}", "-e", f"gpudiag_output_dir={saved}"], env, work)
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-2000:]   # 4: a host was unreachable
    assert "PLAY RECAP" in proc.stdout
    assert sorted(p.name for p in saved.iterdir()) == sorted(f"{h}.out" for h in FLEET_HOSTS + [NO_PYTHON, DOWN])
    run, hosts = ingest(sshd_fleet, saved)
    assert run["kind"] == "ingest" and run["source"]["formats"] == ["frames"]
    assert_same_as_direct(direct, hosts, "file")
    assert hosts[DOWN]["status"] == "unreachable"
    assert "Connection refused" in hosts[DOWN]["reason"]
    assert hosts[NO_PYTHON]["status"] == "python_missing"
    assert "/opt/none/bin/python3" in hosts[NO_PYTHON]["reason"] + hosts[NO_PYTHON]["output_tail"]["stdout"]
