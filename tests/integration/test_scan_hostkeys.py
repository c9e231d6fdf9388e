"""Host keys and ProxyJump through `gpudiag scan` on the sshd fleet: --accept-new records an unknown key
in gpudiag's own file and never accepts a changed one; a jump host carries the connection."""
from pathlib import Path


def scan(fleet, tmp_path, inventory, known, *args):
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--timeout", "60",
                             "--json", *args, env=fleet.env(GPUDIAG_KNOWN_HOSTS=str(known), GPUDIAG_REPORTS=str(reports)))
    return proc, fleet.load_run(proc, reports)[1]


def test_accept_new_records_unknown_keys_and_refuses_changed_ones(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h0, h2, h3 = fleet.host("h0"), fleet.host("h2"), fleet.host("h3")
    fake = Path(str(fleet.unauthorized_key) + ".pub").read_text().split()
    known = tmp_path / "gpudiag_known_hosts"
    known.write_text(f"{h0.known_hosts_line}\n{h2.host_id} {fake[0]} {fake[1]}\n")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h2", "h3"])

    proc, hosts = scan(fleet, tmp_path, inventory, known)
    assert proc.returncode == 3
    assert hosts["h3"]["status"] == "host_key_unknown" and h3.host_key_fingerprint in hosts["h3"]["reason"]

    proc, hosts = scan(fleet, tmp_path, inventory, known, "--accept-new")
    assert hosts["h0"]["status"] == "ok" and hosts["h3"]["status"] == "ok", hosts
    assert hosts["h2"]["status"] == "host_key_changed"      # --accept-new never overrides a changed key
    lines = known.read_text().splitlines()
    assert h3.known_hosts_line in lines                     # recorded as "[127.0.0.5]:port ssh-ed25519 ..."
    assert len(lines) == 3                                  # nothing recorded for h2

    inventory_h3 = fleet.write_inventory(tmp_path / "h3.yaml", ["h3"])
    # Now known: no --accept-new needed. --known-hosts wins over GPUDIAG_KNOWN_HOSTS (an empty file here).
    proc, hosts = scan(fleet, tmp_path, inventory_h3, tmp_path / "empty", "--known-hosts", str(known))
    assert proc.returncode == 0, proc.stderr
    assert hosts["h3"]["status"] == "ok"


def test_user_known_hosts_in_home_is_honoured_with_hashed_entries(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h1 = fleet.host("h1")
    import paramiko
    ssh_dir = tmp_path / "home" / ".ssh"
    ssh_dir.mkdir(parents=True)
    hashed = paramiko.HostKeys.hash_host(h1.host_id)
    (ssh_dir / "known_hosts").write_text(f"{hashed} {' '.join(h1.known_hosts_line.split()[1:])}\n")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h1"])
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json",
                             env=fleet.env(HOME=str(tmp_path / "home"), GPUDIAG_REPORTS=str(reports),
                                           GPUDIAG_KNOWN_HOSTS=str(tmp_path / "empty")))
    assert proc.returncode == 0, proc.stderr
    assert fleet.load_run(proc, reports)[1]["h1"]["status"] == "ok"


def accepted_logins(fleet, name):
    log = Path(fleet.host(name).host_key_path).parent / "sshd.log"
    return log.read_text(errors="replace").count("Accepted publickey for root")


def test_proxyjump_through_one_fleet_host_to_another(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h0, h1, h3 = fleet.host("h0"), fleet.host("h1"), fleet.host("h3")
    known = tmp_path / "known_hosts"                      # h3 left out: an unknown jump host
    known.write_text(f"{h0.known_hosts_line}\n{h1.known_hosts_line}\n")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", [], variants={
        "jumped": ("h1", {"jump": h0.jump_spec}),
        "badjump": ("h1", {"jump": f"root@{h0.address}:1"}),
        "unknownjump": ("h1", {"jump": h3.jump_spec}),
    })
    before = accepted_logins(fleet, "h0"), accepted_logins(fleet, "h1")
    proc, hosts = scan(fleet, tmp_path, inventory, known)
    assert hosts["jumped"]["status"] == "ok", hosts["jumped"]["reason"]
    assert hosts["badjump"]["status"] == "unreachable"
    assert f"jump host root@{h0.address}:1: " in hosts["badjump"]["reason"]
    assert "connection refused" in hosts["badjump"]["reason"]
    assert hosts["unknownjump"]["status"] == "host_key_unknown"
    assert hosts["unknownjump"]["reason"].startswith(f"jump host {h3.jump_spec}: host key for {h3.host_id}")
    # The scan logged into the jump host once and into the target once: the route went through h0.
    assert (accepted_logins(fleet, "h0"), accepted_logins(fleet, "h1")) == (before[0] + 1, before[1] + 1)


def test_proxyjump_from_ansible_ssh_common_args(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h0 = fleet.host("h0")
    inventory = fleet.write_inventory(tmp_path / "ansible.yaml", ["h2"], form="ansible", extra={
        "h2": {"ansible_ssh_common_args": f"-o ProxyJump={h0.jump_spec}"}})
    before = accepted_logins(fleet, "h0")
    proc, hosts = scan(fleet, tmp_path, inventory, fleet.known_hosts)
    assert proc.returncode == 0, proc.stderr
    assert hosts["h2"]["status"] == "ok"
    assert accepted_logins(fleet, "h0") == before + 1


def test_proxyjump_set_only_in_the_system_ssh_config(sshd_fleet, tmp_path):
    """No inventory, no user ssh config: the route and key come from a system-wide config (GPUDIAG_SSH_SYSTEM_CONFIG
    stands for /etc/ssh/ssh_config), its `Include` read from its own folder, as ssh reads them."""
    fleet = sshd_fleet
    h0, h1 = fleet.host("h0"), fleet.host("h1")
    etc = tmp_path / "etc"
    (etc / "ssh_config.d").mkdir(parents=True)
    (etc / "ssh_config").write_text("Include ssh_config.d/*.conf\n")
    (etc / "ssh_config.d" / "fleet.conf").write_text(
        f"Host sysjumped\n    HostName {h1.address}\n    Port {h1.port}\n    User root\n"
        f"    ProxyJump {h0.jump_spec}\nHost *\n    IdentityFile {fleet.client_key}\n")
    reports = tmp_path / "reports"
    env = fleet.env(GPUDIAG_SSH_CONFIG="", GPUDIAG_SSH_SYSTEM_CONFIG=str(etc / "ssh_config"),
                    GPUDIAG_REPORTS=str(reports))
    before = accepted_logins(fleet, "h0"), accepted_logins(fleet, "h1")
    proc = fleet.run_gpudiag("scan", "sysjumped", "--python", fleet.system_python, *fleet.fast_scan_args,
                             "--timeout", "60", "--json", env=env)
    hosts = fleet.load_run(proc, reports)[1]
    assert hosts["sysjumped"]["status"] == "ok", (hosts["sysjumped"]["reason"], proc.stderr[-2000:])
    assert (accepted_logins(fleet, "h0"), accepted_logins(fleet, "h1")) == (before[0] + 1, before[1] + 1)
