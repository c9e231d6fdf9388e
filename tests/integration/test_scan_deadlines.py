"""Deadlines and Ctrl-C through `gpudiag scan` on the sshd fleet: a hung probe, a listener that never
speaks SSH, and SIGINT mid-run all end promptly with a status, and the healthy host stays ok."""
import json
import signal
import subprocess
import time

import pytest

from tests.integration.conftest import loopback_listener


@pytest.fixture
def silent_listener():
    """A TCP listener on loopback that accepts connections and never sends a byte."""
    with loopback_listener("127.0.0.20") as address:
        yield address


def scan(fleet, tmp_path, variants, *args, names=("h0",), timeout=60):
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", list(names), variants=variants)
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json", *args,
                             env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=timeout)
    assert proc.returncode == 3, proc.stderr
    return fleet.load_run(proc, reports)[1]


def test_hung_probe_and_silent_listener_end_at_the_host_deadline(sshd_fleet, tmp_path, silent_listener):
    address, port = silent_listener
    hang = sshd_fleet.script("hanging-python", "cat >/dev/null\nsleep 20")
    hosts = scan(sshd_fleet, tmp_path, {"hang": ("h1", {"python": str(hang)}),
                                        "silent": ("h0", {"address": address, "port": port})},
                 "--timeout", "6", "--connect-timeout", "10")
    assert hosts["h0"]["status"] == "ok", hosts["h0"]["reason"]
    assert hosts["hang"]["status"] == "timeout"
    assert "6 s deadline" in hosts["hang"]["reason"]
    assert hosts["silent"]["status"] == "timeout"
    assert "no SSH session within the 6 s deadline" in hosts["silent"]["reason"]
    for name in ("hang", "silent"):
        assert hosts[name]["duration_s"] < 6 + 5.0     # the deadline, not the 20 s hang (slack for load)


def test_listener_that_never_speaks_ssh_is_unreachable_after_connect_timeout(sshd_fleet, tmp_path,
                                                                             silent_listener):
    address, port = silent_listener
    hosts = scan(sshd_fleet, tmp_path, {"silent": ("h0", {"address": address, "port": port})},
                 "--timeout", "30", "--connect-timeout", "1")
    assert hosts["h0"]["status"] == "ok", hosts["h0"]["reason"]
    assert hosts["silent"]["status"] == "unreachable"
    assert f"{address}:{port} accepts TCP but sent no SSH banner within 1 s" in hosts["silent"]["reason"]
    assert hosts["silent"]["duration_s"] < 1 + 5.0   # the connect timeout, not the 30 s deadline


def test_sigint_keeps_finished_hosts_and_marks_the_run_interrupted(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    slow = fleet.script("slow-python", "cat >/dev/null\nsleep 20")
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"],
                                      variants={"slow": ("h2", {"python": str(slow)})})
    reports = tmp_path / "reports"
    proc = subprocess.Popen(fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
                                                    "--timeout", "60"],
                            env=fleet.env(GPUDIAG_REPORTS=str(reports)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(fleet.home))
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and len(list(reports.glob("runs/*/hosts/*.json"))) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert len(list(reports.glob("runs/*/hosts/*.json"))) == 2, "h0 and h1 never finished"
        interrupted_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        ended_after = time.monotonic() - interrupted_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert ended_after < 10                             # the slow host's connection was closed, not awaited
    run_dir = next(reports.glob("runs/*"))
    run = json.loads((run_dir / "run.json").read_text())
    assert run["interrupted"] is True and run["finished_at"]
    statuses = {h["name"]: h["status"] for h in run["hosts"]}
    assert statuses == {"h0": "ok", "h1": "ok", "slow": "interrupted"}
    files = sorted(p.name for p in (run_dir / "hosts").glob("*.json"))
    assert files == ["h0.json", "h1.json"]
    assert json.loads((run_dir / "hosts" / "h0.json").read_text())["status"] == "ok"


def test_a_real_probe_hung_on_nvidia_smi_answers_within_its_limit_and_keeps_the_rest(sshd_fleet, tmp_path):
    """The env probe itself (not a stand-in interpreter) meets a stand-in nvidia-smi that hangs, found on
    the session's PATH: env cuts the command before its own 3 s limit and still answers (GPUs skipped with
    the reason), deployment's data is kept, and the host ends well inside its deadline."""
    import os
    fleet = sshd_fleet
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)                                   # the session's user writes the pids here
    pids = shared / "nvidia-smi.pids"
    stand_in = fleet.bin_dir / "nvidia-smi"
    stand_in.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 60\n")
    stand_in.chmod(0o755)
    try:
        inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
        reports = tmp_path / "reports"
        proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "env,deployment", "--set",
                                 "env.torch=false", "--probe-timeout", "3", "--timeout", "40", "--json",
                                 env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=90)
        assert proc.returncode == 0, proc.stderr
        host = fleet.load_run(proc, reports)[1]["h0"]
    finally:
        stand_in.unlink()
        for pid in (pids.read_text().split() if pids.exists() else []):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    assert pids.exists()                                  # the probe really ran the hanging nvidia-smi
    assert host["status"] == "ok", host["reason"]
    env = host["probes"]["env"]
    assert env["status"] == "ok" and env["duration_s"] < 3
    assert env["data"]["gpus"]["status"] == "skipped" and "no answer within" in env["data"]["gpus"]["reason"]
    assert env["data"]["hostname"] and env["data"]["python"]["executable"]   # the rest of env is kept
    assert host["probes"]["deployment"]["status"] == "ok" and host["probes"]["deployment"]["data"]
    assert host["duration_s"] < 3 + 25                    # the probe's limit, not the 60 s hang or the host's
