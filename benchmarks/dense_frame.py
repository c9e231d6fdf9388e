"""Control-process memory for a dense, valid frame under the output cap: ~60 MB of tiny JSON objects.

    python benchmarks/dense_frame.py [--hosts 1,16,64] [--mb 60] [--item '{}'] [--baseline DIR]

Each host of the real sshd fleet (loopback) runs a stand-in interpreter that answers the payload with one
frame of `--item` values (default `{}`, empty objects), `--mb` megabytes of it (under the 64 MiB cap). Frames
just under the decoded-size limit (gpudiag/jsonfile.py): `--item '{}' --mb 0.33` (8 MiB of objects, the floor)
and `--item '"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"' --mb 9.5` (56-character strings, estimated
at 1.98x their text, under the 2.0x limit; 40-character ones, at 2.35x, are refused).
The peak RSS (VmHWM) of the `gpudiag scan` process is sampled from /proc and printed as a ratio to the frame's bytes times the hosts
whose frames the control side held at once (the pool, --forks, is the fleet size here), less the floor:
the same scan's peak for one host with an empty frame. `--baseline DIR`
runs the same scan with another gpudiag checkout (e.g. `git archive` of an older commit) side by side.
Goals: under 5x the frame's size per host, under 512 MiB for one host.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bounded_capture import peak_rss_mib
from fleet_support import ROOT, load_fleet_module

DENSE = """exec {python} -c '
import sys, json
nonce = json.loads(sys.stdin.readline())["nonce"]
body = "{{\\"schema\\": 1, \\"probes\\": {{}}, \\"dense\\": [" + ",".join([{item}] * {count}) + "]}}"
sys.stdout.write("GPUDIAG-BEGIN " + nonce + "\\n" + body + "\\nGPUDIAG-END " + nonce + "\\n")
'"""


def dense_scan(fleet, hosts: int, megabytes: float, code_root: Path, work: Path, floor: float = 0.0,
               item: str = "{}") -> dict:
    count = max(1, int(megabytes * 10**6 // (len(item) + 1)))
    stand_in = fleet.script(f"dense-{megabytes}-{len(item)}-python",
                            DENSE.format(python=fleet.system_python, count=count, item=json.dumps(item)))
    variants = {f"dense{i:02d}": (fleet.hosts[i % len(fleet.hosts)].name, {"python": str(stand_in)})
                for i in range(hosts)}
    inventory = fleet.write_inventory(work / f"inventory-{hosts}.yaml", [], variants=variants)
    env = fleet.env(GPUDIAG_REPORTS=str(work / "reports"), PYTHONPATH=str(code_root))
    argv = [sys.executable, "-m", "gpudiag", "scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
            "--timeout", "600", "--forks", str(hosts), "--json"]
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=str(work), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, peak_rss_mib(proc.pid) or 0.0)
        time.sleep(0.05)
    out = proc.stdout.read().decode() if proc.stdout else ""
    statuses: dict[str, int] = {}
    try:
        for host in json.loads(out)["hosts"]:
            key = f"{host['status']} ({host['reason']})"
            statuses[key] = statuses.get(key, 0) + 1
    except (ValueError, KeyError):
        statuses = {"unreadable output": 1}
    stored = sum(p.stat().st_size for p in (work / "reports").rglob("*.json"))
    frame_mib = count * (len(item) + 1) / 2**20
    return {"hosts": hosts, "frame_mib": round(frame_mib, 1), "peak_rss_mib": round(peak, 1),
            "per_host_ratio": round((peak - floor) / (frame_mib * hosts), 2), "wall_s": round(time.monotonic() - started, 1),
            "stored_mib": round(stored / 2**20, 2), "exit": proc.returncode, "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,16,64", help="comma-separated fleet sizes")
    parser.add_argument("--mb", type=float, default=60, help="frame size, megabytes")
    parser.add_argument("--item", default="{}", help="the JSON value the frame repeats")
    parser.add_argument("--baseline", type=Path, help="another gpudiag checkout to compare with")
    args = parser.parse_args()
    sizes = [int(n) for n in args.hosts.split(",")]
    fleet = load_fleet_module().SSHDFleet(4).start()
    try:
        with tempfile.TemporaryDirectory(prefix="gpudiag-bench-") as tmp:
            for label, root in [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else []):
                for hosts in sizes:
                    work = Path(tmp) / f"{label.replace(' ', '-')}-{hosts}"
                    work.mkdir()
                    floor_work = work / "floor"
                    floor_work.mkdir()
                    floor = dense_scan(fleet, 1, 0, root, floor_work)["peak_rss_mib"]
                    result = dense_scan(fleet, hosts, args.mb, root, work, floor, args.item)
                    print(f"{label}: floor {floor} MiB (an empty frame), {result}", flush=True)
    finally:
        fleet.stop()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("needs root (the sshd fleet)")
    main()
