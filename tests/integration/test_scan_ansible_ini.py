"""Against real sshd hosts on loopback: an Ansible INI inventory scans with no changes, and a host
defined only through an ssh config `Include` scans."""
from __future__ import annotations

FAST = ("--probes", "env", "--set", "env.torch=false")


def ini_inventory(fleet, names) -> str:
    lines = ["# as Ansible's `hosts` file", "[gpus]"]
    for name in names:
        h = fleet.host(name)
        lines.append(f"{name} ansible_host={h.address} ansible_port={h.port}")
    first = fleet.host(names[0])
    lines += ["", "[gpus:vars]", f"ansible_user={first.user}", f"ansible_ssh_private_key_file={first.key_path}",
              f"ansible_python_interpreter={fleet.system_python}", "",
              "[lab:children]", "gpus", "", "[other]", "unreachable-by-design ansible_connection=winrm"]
    return "\n".join(lines) + "\n"


def test_ansible_ini_inventory_scans_a_group(sshd_fleet, tmp_path):
    names = [h.name for h in sshd_fleet.hosts[:2]]
    inventory = tmp_path / "hosts"
    inventory.write_text(ini_inventory(sshd_fleet, names))
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "lab", "-i", str(inventory), *FAST, "--json",
                                  "--reports-dir", str(reports), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr          # the winrm host is not targeted
    _, hosts = sshd_fleet.load_run(proc, reports=reports)
    assert sorted(hosts) == sorted(names)
    for name in names:
        assert hosts[name]["status"] == "ok", hosts[name]
        assert hosts[name]["address"] == sshd_fleet.host(name).address


def test_host_defined_through_an_ssh_config_include_scans(sshd_fleet, tmp_path):
    h = sshd_fleet.host(sshd_fleet.hosts[0].name)
    included = sshd_fleet.home / ".ssh" / f"included-{tmp_path.name}"
    included.mkdir(parents=True, exist_ok=True)
    (included / "gpu.conf").write_text(f"Host gpu-included\n  HostName {h.address}\n  Port {h.port}\n"
                                       f"  User {h.user}\n  IdentityFile {h.key_path}\n")
    config = tmp_path / "ssh_config"
    config.write_text(f"Include {included.name}/*.conf\n")   # relative: under ~/.ssh, as OpenSSH reads it
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "gpu-included", "--python", sshd_fleet.system_python, *FAST, "--json",
                                  "--reports-dir", str(reports), timeout=120,
                                  env=sshd_fleet.env(GPUDIAG_SSH_CONFIG=str(config)))
    assert proc.returncode == 0, proc.stderr
    _, hosts = sshd_fleet.load_run(proc, reports=reports)
    assert hosts["gpu-included"]["status"] == "ok"
    assert hosts["gpu-included"]["address"] == h.address


def test_an_inventory_directory_with_group_vars_and_host_vars_scans(sshd_fleet, tmp_path):
    """The connection settings live beside the inventory, as most Ansible users keep them: the INI file
    names the hosts only; group_vars/all.yml beats a wrong [gpus:vars]; host_vars/ gives address and port."""
    names = [h.name for h in sshd_fleet.hosts[:2]]
    first = sshd_fleet.host(names[0])
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "gpus").mkdir(parents=True)
    (inventory / "host_vars").mkdir()
    (inventory / "hosts.ini").write_text("[gpus]\n" + "\n".join(names) + "\n\n[gpus:vars]\nansible_user=nobody-here\n")
    (inventory / "group_vars" / "all.yml").write_text(f"ansible_user: {first.user}\n")
    (inventory / "group_vars" / "gpus" / "ssh.yml").write_text(
        f"ansible_ssh_private_key_file: {first.key_path}\nansible_python_interpreter: {sshd_fleet.system_python}\n")
    for name in names:
        h = sshd_fleet.host(name)
        (inventory / "host_vars" / f"{name}.yml").write_text(f"ansible_host: {h.address}\nansible_port: {h.port}\n")
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "gpus", "-i", str(inventory), *FAST, "--json",
                                  "--reports-dir", str(reports), timeout=120)
    assert proc.returncode == 0, proc.stderr
    _, hosts = sshd_fleet.load_run(proc, reports=reports)
    assert sorted(hosts) == sorted(names)
    for name in names:
        assert hosts[name]["status"] == "ok", hosts[name]
        assert hosts[name]["address"] == sshd_fleet.host(name).address
