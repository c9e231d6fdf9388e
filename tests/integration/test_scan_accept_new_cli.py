"""`gpudiag scan --accept-new` on the sshd fleet says which host keys it recorded, with the fingerprint
OpenSSH shows for them; a key already known is not said again."""
from pathlib import Path


def scan(fleet, tmp_path, inventory, known, *args):
    reports = tmp_path / "reports"
    return fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--timeout", "60",
                             "--json", *args, env=fleet.env(GPUDIAG_KNOWN_HOSTS=str(known), GPUDIAG_REPORTS=str(reports)))


def test_accept_new_prints_each_recorded_fingerprint(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h0, h1 = fleet.host("h0"), fleet.host("h1")
    known = tmp_path / "known_hosts"
    known.write_text(f"{h0.known_hosts_line}\n")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
    proc = scan(fleet, tmp_path, inventory, known, "--accept-new")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "recorded the host key" in line]
    key_type = h1.known_hosts_line.split()[1]
    assert said == [f"gpudiag: recorded the host key of {h1.host_id}: {key_type} {h1.host_key_fingerprint} in {known}"]
    again = scan(fleet, tmp_path, inventory, known, "--accept-new")
    assert again.returncode == 0 and "recorded the host key" not in again.stderr
    assert Path(known).read_text().count("\n") == 2


def repro(fleet, tmp_path, inventory, known, *args):
    return fleet.run_gpudiag("repro", "cuda-graph-crash", "-i", str(inventory), "all", "--batch-sizes", "1",
                             "--timeout", "120", "--reports-dir", str(tmp_path / "reports"), *args,
                             env=fleet.env(GPUDIAG_KNOWN_HOSTS=str(known)), timeout=300)


def test_repro_accept_new_prints_each_recorded_fingerprint_and_a_plan_does_too(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    h0, h1 = fleet.host("h0"), fleet.host("h1")
    known = tmp_path / "known_hosts"
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
    proc = repro(fleet, tmp_path, inventory, known, "--plan", "--accept-new")
    said = sorted(line for line in proc.stderr.splitlines() if "recorded the host key" in line)
    assert said == sorted(f"gpudiag: recorded the host key of {h.host_id}: {h.known_hosts_line.split()[1]} "
                          f"{h.host_key_fingerprint} in {known}" for h in (h0, h1)), proc.stderr[-2000:]
    known.write_text(f"{h0.known_hosts_line}\n")           # h1 forgotten: the real run records it again
    proc = repro(fleet, tmp_path, inventory, known, "--accept-new")
    assert (tmp_path / "reports" / "runs").is_dir(), proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if "recorded the host key" in line]
    assert said == [f"gpudiag: recorded the host key of {h1.host_id}: {h1.known_hosts_line.split()[1]} "
                    f"{h1.host_key_fingerprint} in {known}"], proc.stderr[-2000:]
    again = repro(fleet, tmp_path, inventory, known, "--accept-new")
    assert "recorded the host key" not in again.stderr
