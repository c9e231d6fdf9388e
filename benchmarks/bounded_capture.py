"""Control-process memory while hosts flood their output: `yes` as the login's interpreter.

    python benchmarks/bounded_capture.py [--hosts 1,64] [--timeout 30] [--baseline DIR]

Each host of the real sshd fleet (loopback) runs `yes` instead of the probes, for the whole deadline
or until the output cap cuts it off. The peak RSS (VmHWM) of the `gpudiag scan` process is sampled from
/proc. `--baseline DIR` runs the same scan with another gpudiag checkout (e.g. `git archive` of an
older commit) for a ratio; a baseline without an output cap grows with the deadline, so keep it short.
Goals: one host under 200 MiB, 64 hosts under 1 GiB.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet_support import ROOT, load_fleet_module


def peak_rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def flood_scan(fleet, hosts: int, timeout: float, code_root: Path, work: Path, max_output: int | None) -> dict:
    flood = fleet.script("yes-python", "exec yes")
    variants = {f"flood{i:02d}": (fleet.hosts[i % len(fleet.hosts)].name, {"python": str(flood)})
                for i in range(hosts)}
    inventory = fleet.write_inventory(work / f"inventory-{hosts}.yaml", [], variants=variants)
    env = fleet.env(GPUDIAG_REPORTS=str(work / "reports"), PYTHONPATH=str(code_root))
    argv = [sys.executable, "-m", "gpudiag", "scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
            "--timeout", str(timeout), "--forks", str(hosts), "--json"]
    if max_output:
        argv += ["--max-output", str(max_output)]
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=str(work), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, peak_rss_mib(proc.pid) or 0.0)
        time.sleep(0.05)
    out = proc.stdout.read().decode() if proc.stdout else ""
    statuses: dict[str, int] = {}
    try:
        import json
        for host in json.loads(out)["hosts"]:
            key = host["status"] + (f" ({host['reason']})" if host["status"] == "frame_error" else "")
            statuses[key] = statuses.get(key, 0) + 1
    except (ValueError, KeyError):
        statuses = {"unreadable output": 1}
    return {"hosts": hosts, "peak_rss_mib": round(peak, 1), "wall_s": round(time.monotonic() - started, 1),
            "exit": proc.returncode, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,64", help="comma-separated fleet sizes")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-host deadline, seconds")
    parser.add_argument("--baseline", type=Path, help="another gpudiag checkout to compare with")
    parser.add_argument("--max-output", type=int, help="scan --max-output (MiB); 4096 lets `yes` run the whole "
                                                       "deadline")
    args = parser.parse_args()
    sizes = [int(n) for n in args.hosts.split(",")]
    fleet = load_fleet_module().SSHDFleet(4).start()
    try:
        with tempfile.TemporaryDirectory(prefix="gpudiag-bench-") as tmp:
            for label, root in [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else []):
                for hosts in sizes:
                    work = Path(tmp) / f"{label.replace(' ', '-')}-{hosts}"
                    work.mkdir()
                    cap = args.max_output if label == "this tree" else None
                    result = flood_scan(fleet, hosts, args.timeout, root, work, cap)
                    print(f"{label}: {result}", flush=True)
    finally:
        fleet.stop()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("needs root (the sshd fleet)")
    main()
