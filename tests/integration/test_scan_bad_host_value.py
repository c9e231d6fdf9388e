"""One host's inventory value that no login shell reads alike (a `'` in `python:`) costs that host only: it
is named in one warning line and refused without being contacted, and the other hosts are scanned."""


def test_a_quote_in_one_hosts_python_skips_that_host_only(sshd_fleet, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"],
                                           extra={"h0": {"python": "/usr/bin/py'thon3"}})
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                  env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)))
    assert proc.returncode == 3, proc.stderr
    hosts = sshd_fleet.load_run(proc, reports)[1]
    assert hosts["h1"]["status"] == "ok"
    assert hosts["h0"]["status"] == "unreachable" and "not scanned" in hosts["h0"]["reason"]
    warned = [line for line in proc.stderr.splitlines() if line.startswith("gpudiag: warning:")]
    assert len(warned) == 1 and warned[0].startswith("gpudiag: warning: h0: not scanned: "), proc.stderr
