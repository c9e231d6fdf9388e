"""`gpudiag scan` against `ansible all -m script` running the same probe bundle on the same sshd fleet.

    python benchmarks/fleet_scan.py [--hosts 16] [--runs 3] [--probes env,torch_caps,...] [--ansible PATH]

Starts N real sshd hosts on 127.0.0.2... (the integration fixture's SSHDFleet), then times, interleaved,
each command's whole wall time, cold: `gpudiag scan` opens fresh paramiko connections every run, and
Ansible gets a fresh ControlPath dir every run (its masters are stopped after each run), both with 32
forks. Ansible runs the bundle as a self-contained script (bootstrap + payload embedded in a heredoc).
Every run is checked: each host must print a complete frame. Prints medians, the ratio
gpudiag/ansible (target <= 0.25) and the fan-out cost scan(N)/scan(1). Needs root, openssh-server,
and ansible-core (`pip install ansible-core`, a benchmark-only dependency).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fleet_support import load_fleet_module  # noqa: E402

from gpudiag import bundle  # noqa: E402

FORKS = 32


def write_ansible_script(path: Path, python: str, probes: list[str], nonce: str) -> None:
    """The bundle as one self-contained shell script: the bootstrap reads the payload from a heredoc."""
    payload = bundle.build_payload(probes, {"deep": False, "force": False}, nonce=nonce)
    argv = shlex.join(bundle.bootstrap_argv(python))
    path.write_text(f"#!/bin/sh\n{argv} <<'GPUDIAG_PAYLOAD_END'\n{payload.data.decode()}\nGPUDIAG_PAYLOAD_END\n")
    path.chmod(0o755)


def time_gpudiag(fleet, inventory: Path, python: str, probes: list[str], expected: int, work: Path) -> float:
    reports = Path(tempfile.mkdtemp(dir=work, prefix="reports-"))
    started = time.perf_counter()
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--python", python, "--probes", ",".join(probes),
                             "--forks", str(FORKS), "--timeout", "120", "--json",
                             env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=300)
    elapsed = time.perf_counter() - started
    run = json.loads(proc.stdout)
    ok = [h for h in run["hosts"] if h["status"] in ("ok", "probe_error")]   # probe_error: the frame arrived
    if len(ok) != expected:
        raise SystemExit(f"gpudiag scan: {len(ok)}/{expected} hosts answered: {proc.stderr[-2000:]}")
    return elapsed


def time_local_floor(python: str, probes: list[str], count: int) -> float:
    """The same bundle run `count` times at once as local child processes, no SSH: on a loopback fleet
    the "hosts" share this machine's CPUs, so this is the floor under both tools' wall times."""
    payload = bundle.build_payload(probes, {"deep": False, "force": False})
    started = time.perf_counter()
    procs = [subprocess.Popen(bundle.bootstrap_argv(python), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL) for _ in range(count)]
    for proc in procs:
        proc.stdin.write(payload.data)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    outputs = [proc.stdout.read() for proc in procs]  # type: ignore[union-attr]
    for proc in procs:
        proc.wait()
    elapsed = time.perf_counter() - started
    for output in outputs:
        bundle.extract_frame(output, payload.nonce)
    return elapsed


def ansible_env(fleet, work: Path) -> tuple[dict[str, str], Path]:
    control_dir = Path(tempfile.mkdtemp(dir=work, prefix="cp-"))
    env = fleet.env()
    env.update(ANSIBLE_SSH_CONTROL_PATH_DIR=str(control_dir), ANSIBLE_REMOTE_TEMP=str(work / "ansible-remote"),
               ANSIBLE_LOCAL_TEMP=str(work / "ansible-local"), ANSIBLE_HOST_KEY_CHECKING="True",
               ANSIBLE_NOCOLOR="1",
               ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3", ANSIBLE_DEPRECATION_WARNINGS="False")
    return env, control_dir


def stop_masters(control_dir: Path) -> None:
    for socket_path in control_dir.iterdir():
        subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "x"], capture_output=True,
                       timeout=10)
    shutil.rmtree(control_dir, ignore_errors=True)


def time_ansible(fleet, ansible: str, inventory: Path, script: Path, nonce: str, expected: int, work: Path) -> float:
    env, control_dir = ansible_env(fleet, work)
    started = time.perf_counter()
    proc = subprocess.run([ansible, "all", "-i", str(inventory), "-m", "script", "-a", str(script),
                           "-f", str(FORKS)], capture_output=True, text=True, env=env, timeout=600)
    elapsed = time.perf_counter() - started
    stop_masters(control_dir)
    framed = sum(f"GPUDIAG-END {nonce}" in str(result.get("stdout", ""))
                 for result in _ansible_host_results(proc.stdout))
    if framed != expected:
        raise SystemExit(f"ansible: {framed}/{expected} hosts printed a frame (exit {proc.returncode}): "
                         f"{(proc.stderr or proc.stdout)[-2000:]}")
    return elapsed


def _ansible_host_results(stdout: str) -> list[dict]:
    """Per-host results from ad-hoc output: `NAME | STATUS => {json}` blocks."""
    decoder, results = json.JSONDecoder(), []
    for match in re.finditer(r"^\S+ \| [A-Z]+(?:!)? => ", stdout, re.M):
        try:
            results.append(decoder.raw_decode(stdout, match.end())[0])
        except ValueError:
            continue
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probes", default=",".join(bundle.LIGHT_PROBES))
    parser.add_argument("--ansible", default=shutil.which("ansible"), help="the ansible executable")
    args = parser.parse_args(argv)
    if not args.ansible:
        raise SystemExit("ansible not found: pip install ansible-core (benchmark-only dependency)")
    probes = [p for p in args.probes.split(",") if p]
    fleet_module = load_fleet_module()
    fleet = fleet_module.SSHDFleet(args.hosts).start()
    work = Path(tempfile.mkdtemp(prefix="gpudiag-bench-"))
    try:
        python = fleet.system_python
        gpudiag_all = fleet.write_inventory(work / "gpudiag.yaml")
        gpudiag_one = fleet.write_inventory(work / "gpudiag-one.yaml", ["h0"])
        trust = f"-o UserKnownHostsFile={fleet.known_hosts} -o StrictHostKeyChecking=yes"
        ansible_inv = fleet.write_inventory(work / "ansible.yaml", form="ansible", python=python,
                                            extra={h.name: {"ansible_ssh_common_args": trust} for h in fleet.hosts})
        nonce = "benchmark0000001"
        script = work / "gpudiag-probes.sh"
        write_ansible_script(script, python, probes, nonce)
        times: dict[str, list[float]] = {"gpudiag": [], "ansible": [], "gpudiag_one": [], "floor": []}
        for _ in range(args.runs):
            times["floor"].append(time_local_floor(python, probes, args.hosts))
            times["gpudiag"].append(time_gpudiag(fleet, gpudiag_all, python, probes, args.hosts, work))
            times["ansible"].append(time_ansible(fleet, args.ansible, ansible_inv, script, nonce, args.hosts, work))
            times["gpudiag_one"].append(time_gpudiag(fleet, gpudiag_one, python, probes, 1, work))
        report(times, args, probes)
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(times: dict[str, list[float]], args: argparse.Namespace, probes: list[str]) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"fleet: {args.hosts} loopback sshd hosts, probes {','.join(probes)}, {args.runs} runs each, "
          f"{FORKS} forks, cold connections, {os.cpu_count()} CPUs")
    for name, label in (("gpudiag", f"gpudiag scan ({args.hosts} hosts)"),
                        ("ansible", f"ansible -m script ({args.hosts} hosts)"),
                        ("gpudiag_one", "gpudiag scan (1 host)"),
                        ("floor", f"bundle x{args.hosts}, local, no SSH")):
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"  {label:32s} median {med[name]:6.2f} s   runs: {runs}")
    print(f"ratio gpudiag/ansible wall time: {med['gpudiag'] / med['ansible']:.3f}x (target <= 0.25x)")
    print(f"above the probe-work floor: gpudiag +{med['gpudiag'] - med['floor']:.2f} s, "
          f"ansible +{med['ansible'] - med['floor']:.2f} s")
    print(f"fan-out cost scan({args.hosts})/scan(1): {med['gpudiag'] / med['gpudiag_one']:.2f}x")


if __name__ == "__main__":
    main()
