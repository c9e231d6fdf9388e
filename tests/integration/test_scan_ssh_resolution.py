"""Against a real sshd on loopback: with ssh installed, `scan` resolves a host's settings through `ssh -G`,
so a setting reachable only through what gpudiag's own ssh_config reader does not implement (the
`Match originalhost=NAME` form of a criterion) is honoured; with no ssh on PATH the own reader resolves
it instead. run.json records the resolver per host and the report says it in one line."""
from __future__ import annotations

import json
import os
import pwd
import sys
from pathlib import Path

from conftest import free_port

FAST = ("--probes", "env", "--set", "env.torch=false")
NAME = "gpu-openssh"


def write_config(fleet, path: Path) -> Path:
    """Only `Match originalhost=` leads to the live sshd; the `Host` block below it, which the own reader
    falls back to, names a loopback port where nothing listens."""
    h = fleet.hosts[0]
    path.write_text(f"Match originalhost={NAME}\n  HostName {h.address}\n  Port {h.port}\n"
                    f"Host {NAME}\n  HostName 127.0.0.1\n  Port {free_port('127.0.0.1')}\n"
                    f"  User {h.user}\n  IdentityFile {h.key_path}\n")
    return path


def scan(fleet, tmp_path, **env):
    reports = tmp_path / "reports"
    # ssh reads `~` as the account's home: gpudiag asks it only where HOME says the same
    environment = fleet.env(GPUDIAG_SSH_CONFIG=str(write_config(fleet, tmp_path / "ssh_config")),
                            HOME=pwd.getpwuid(os.getuid()).pw_dir, **env)
    proc = fleet.run_gpudiag("scan", NAME, "--python", fleet.system_python, *FAST, "--json",
                             "--reports-dir", str(reports), timeout=120, env=environment)
    run, hosts = fleet.load_run(proc, reports=reports)
    report = fleet.run_gpudiag("report", run["run_id"], "--reports-dir", str(reports), env=environment)
    markdown = fleet.run_gpudiag("report", run["run_id"], "--markdown", "--reports-dir", str(reports),
                                 env=environment)
    return proc, run, hosts, report.stdout, markdown.stdout


def test_scan_resolves_the_host_through_ssh_g(sshd_fleet, tmp_path):
    proc, run, hosts, console, markdown = scan(sshd_fleet, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert hosts[NAME]["status"] == "ok", hosts[NAME]
    assert hosts[NAME]["address"] == sshd_fleet.hosts[0].address
    resolved_by = run["ssh_settings"]["resolved_by"][NAME]
    assert resolved_by.startswith("`ssh -G` (OpenSSH_"), run["ssh_settings"]
    assert f"ssh settings: resolved by {resolved_by}" in console.splitlines()
    assert "- ssh settings: resolved by \\`ssh -G\\` (OpenSSH_" in markdown


def test_without_ssh_on_path_the_own_reader_resolves_and_the_report_says_why(sshd_fleet, tmp_path):
    bare_bin = tmp_path / "bin"   # a PATH with Python and no ssh
    bare_bin.mkdir()
    (bare_bin / "python3").symlink_to(sys.executable)
    proc, run, hosts, console, markdown = scan(sshd_fleet, tmp_path, PATH=str(bare_bin))
    assert proc.returncode != 0
    assert hosts[NAME]["status"] == "unreachable", hosts[NAME]   # the Match block is beyond the own reader
    assert "Match originalhost=" in proc.stderr and "not supported" in proc.stderr
    expected = "gpudiag's own ssh_config reader: ssh not found"
    assert run["ssh_settings"]["resolved_by"] == {NAME: expected}, json.dumps(run.get("ssh_settings"))
    assert f"ssh settings: resolved by {expected}" in console.splitlines()
    assert f"- ssh settings: resolved by {expected}" in markdown
