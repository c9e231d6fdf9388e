"""The bundle run by real engines (Ansible, pdsh) on the loopback sshd fleet, then ingested: the same
facts as a direct `gpudiag scan` of the same hosts, and a down host reported as unreachable."""
import importlib.util
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "contrib" / "ansible" / "gpudiag-scan.yml"
FLEET_HOSTS = ["h0", "h1", "h2", "h3"]
DOWN = "hdown"


def closed_port(address="127.0.0.250"):
    """A loopback address and port nothing listens on: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind((address, 0))
        return address, sock.getsockname()[1]


def facts(doc):
    """What must agree between a direct scan and an engine run of the same host."""
    env = doc["probes"]["env"]["data"]
    return {"status": doc["status"], "probes": {k: v["status"] for k, v in doc["probes"].items()},
            "python": doc["python"], "env": {k: env[k] for k in ("hostname", "os", "kernel", "cpu_count")},
            "env_python": {k: env["python"][k] for k in ("executable", "version")}}


@pytest.fixture(scope="module")
def direct(sshd_fleet, tmp_path_factory):
    """A direct scan of the fleet and the bundle the engines will run."""
    work = tmp_path_factory.mktemp("engines")
    inventory = sshd_fleet.write_inventory(work / "inventory.yaml", FLEET_HOSTS)
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "env", "--json", timeout=180)
    _, hosts = sshd_fleet.load_run(proc)
    assert all(h["status"] == "ok" for h in hosts.values()), proc.stderr
    bundle = work / "gpudiag-probes.pyz"
    built = sshd_fleet.run_gpudiag("bundle", "-o", str(bundle), "--probes", "env")
    assert built.returncode == 0, built.stderr
    return {"work": work, "hosts": hosts, "bundle": bundle}


def ingest(sshd_fleet, *sources):
    proc = sshd_fleet.run_gpudiag("ingest", *map(str, sources), "--json")
    assert proc.returncode in (0, 3), proc.stderr
    run, hosts = sshd_fleet.load_run(proc)
    return run, hosts


def assert_same_as_direct(direct, hosts, engine):
    for name in FLEET_HOSTS:
        assert facts(hosts[name]) == facts(direct["hosts"][name]), name
        assert hosts[name]["transport"] == engine


# -- Ansible ---------------------------------------------------------------------------------------
def ansible_inventory(sshd_fleet, work):
    path = sshd_fleet.write_inventory(work / "ansible-inventory.yaml", FLEET_HOSTS, form="ansible")
    doc = yaml.safe_load(path.read_text())
    address, port = closed_port()
    doc["all"]["hosts"][DOWN] = {"ansible_host": address, "ansible_port": port, "ansible_user": "root"}
    doc["all"]["vars"] = {"ansible_ssh_common_args": f"-o UserKnownHostsFile={sshd_fleet.known_hosts} "
                                                     "-o StrictHostKeyChecking=yes"}
    path.write_text(yaml.safe_dump(doc))
    return path


def ansible_env(sshd_fleet, **extra):
    # The fleet's sshd has no sftp subsystem: go straight to piped transfers instead of two fallbacks.
    return sshd_fleet.env(ANSIBLE_SSH_TRANSFER_METHOD="piped", ANSIBLE_FORKS="8", ANSIBLE_NOCOLOR="1",
                          ANSIBLE_LOCAL_TEMP=str(sshd_fleet.home / "ansible-tmp"), **extra)


def run_engine(argv, env, cwd):
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=240,
                          stdin=subprocess.DEVNULL)


needs_ansible = pytest.mark.skipif(shutil.which("ansible") is None,
                                   reason="ansible-core is not installed (pip install ansible-core)")


@needs_ansible
def test_ansible_adhoc_script_default_output(sshd_fleet, direct):
    work = direct["work"]
    inventory = ansible_inventory(sshd_fleet, work)
    proc = run_engine(["ansible", "all", "-i", str(inventory), "-m", "script", "-a", str(direct["bundle"])],
                      ansible_env(sshd_fleet), work)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]   # 4: some host unreachable
    out = work / "ansible-adhoc.txt"
    out.write_text(proc.stdout)
    run, hosts = ingest(sshd_fleet, out)
    assert run["kind"] == "ingest" and run["source"]["engines"] == ["ansible"]
    assert_same_as_direct(direct, hosts, "ansible")
    assert hosts[DOWN]["status"] == "unreachable"
    assert "Connection refused" in hosts[DOWN]["reason"]


@needs_ansible
def _has_ansible_posix() -> bool:
    try:
        return importlib.util.find_spec("ansible_collections.ansible.posix") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not _has_ansible_posix(),
                    reason="Ansible's json callback lives in the ansible.posix collection (pip install ansible)")
def test_ansible_playbook_json_callback(sshd_fleet, direct):
    work = direct["work"]
    inventory = ansible_inventory(sshd_fleet, work)
    saved = work / "playbook-out"
    env = ansible_env(sshd_fleet, ANSIBLE_STDOUT_CALLBACK="json")
    proc = run_engine(["ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e",
                       f"gpudiag_bundle={direct['bundle']}", "-e", f"gpudiag_output_dir={saved}"], env, work)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = work / "ansible-playbook.json"
    out.write_text(proc.stdout)
    run, hosts = ingest(sshd_fleet, out)
    assert run["source"]["formats"] == ["ansible-json"]
    assert_same_as_direct(direct, hosts, "ansible")
    assert hosts[DOWN]["status"] == "unreachable"
    # The per-host files the playbook saved are a second, callback-independent way in.
    assert sorted(p.stem for p in saved.iterdir()) == sorted(FLEET_HOSTS + [DOWN])
    _, from_files = ingest(sshd_fleet, saved)
    assert from_files.pop(DOWN)["status"] == "unreachable"
    assert {n: facts(d) for n, d in from_files.items()} == {n: facts(direct["hosts"][n]) for n in FLEET_HOSTS}


# -- pdsh ------------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("pdsh") is None, reason="pdsh is not installed (apt-get install pdsh)")
def test_pdsh_prefixed_output(sshd_fleet, direct):
    work = direct["work"]
    config = work / "ssh_config"
    address, port = closed_port()
    entries = [(h.name, h.address, h.port) for h in sshd_fleet.hosts if h.name in FLEET_HOSTS]
    config.write_text("".join(
        f"Host {name}\n  HostName {addr}\n  Port {p}\n  User root\n  IdentityFile {sshd_fleet.client_key}\n"
        f"  UserKnownHostsFile {sshd_fleet.known_hosts}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        for name, addr, p in entries + [(DOWN, address, port)]))
    env = sshd_fleet.env(PDSH_SSH_ARGS_APPEND=f"-F {config}")
    # The fleet shares this machine's disk; on a real cluster pdcp (or a shared path) places the bundle.
    proc = run_engine(["pdsh", "-R", "ssh", "-w", ",".join(FLEET_HOSTS + [DOWN]),
                       f"python3 {direct['bundle']}"], env, work)
    out = work / "pdsh.out"
    out.write_text(proc.stdout + proc.stderr)           # as `pdsh ... 2>&1 > pdsh.out` would keep it
    run, hosts = ingest(sshd_fleet, out)
    assert run["source"]["engines"] == ["pdsh"]
    assert_same_as_direct(direct, hosts, "pdsh")
    assert hosts[DOWN]["status"] == "unreachable"
    assert "Connection refused" in hosts[DOWN]["reason"]
