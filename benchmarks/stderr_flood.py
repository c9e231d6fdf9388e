"""Reading a host's stderr flood: `gpudiag scan` against `ssh host` over the same real sshd (loopback).

    python benchmarks/stderr_flood.py [--mb 64] [--line-bytes 90] [--repeat 3] [--baseline DIR]

A stand-in interpreter on one fleet host writes `--mb` megabytes of plain stderr lines, then a frame. Timed
side by side, best of `--repeat`: OpenSSH's `ssh` running the same script with its stderr to /dev/null
(what reading the bytes costs), and `gpudiag scan` of that host (reading the bytes, looking for progress
events in them and keeping a tail). `--baseline DIR` times another gpudiag checkout (e.g. `git archive` of
an older commit) the same way. Each is also timed with no stderr at all (connecting, starting, the
frame), and the ratio printed is of what the flood adds: (flood - empty) for gpudiag over the same for ssh.
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

FLOOD = """exec {python} -c '
import sys, json
nonce = json.loads(sys.stdin.readline())["nonce"]
block = (b"W" * {line} + b"\\n") * (65536 // ({line} + 1))
for _ in range({mb} * 10**6 // len(block)):
    sys.stderr.buffer.write(block)
sys.stderr.flush()
print("GPUDIAG-BEGIN " + nonce)
print(json.dumps({{"schema": 1, "probes": {{}}}}))
print("GPUDIAG-END " + nonce)
'"""


def best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        run()
        times.append(time.monotonic() - started)
    return min(times)


def ssh_run(fleet, script: Path) -> None:
    h = fleet.host("h0")
    argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i", h.key_path, "-p", str(h.port),
            f"{h.user}@{h.address}", f"echo '{{\"nonce\": \"n\"}}' | {script}"]
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                   check=True, timeout=600)


def gpudiag_run(fleet, script: Path, code_root: Path, work: Path) -> None:
    inventory = fleet.write_inventory(work / "inventory.yaml", [], variants={"flood": ("h0", {"python": str(script)})})
    env = fleet.env(GPUDIAG_REPORTS=str(work / "reports"), PYTHONPATH=str(code_root))
    argv = [sys.executable, "-m", "gpudiag", "scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
            "--timeout", "600", "--json"]
    subprocess.run(argv, env=env, cwd=str(work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=700)


def timed(fleet, args, mb: int, roots, tmp: Path) -> dict[str, float]:
    script = fleet.script(f"stderr-flood-{mb}-python", FLOOD.format(python=fleet.system_python, mb=mb,
                                                                      line=args.line_bytes - 1))
    took = {"ssh": best(lambda: ssh_run(fleet, script), args.repeat)}
    for label, root in roots:
        work = tmp / f"{label.replace(' ', '-')}-{mb}"
        work.mkdir()
        took[label] = best(lambda root=root, work=work: gpudiag_run(fleet, script, root, work), args.repeat)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="megabytes of stderr")
    parser.add_argument("--line-bytes", type=int, default=90, help="length of each stderr line, newline included")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another gpudiag checkout to compare with")
    args = parser.parse_args()
    fleet = load_fleet_module().SSHDFleet(1).start()
    roots = [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    try:
        with tempfile.TemporaryDirectory(prefix="gpudiag-bench-") as tmp:
            empty = timed(fleet, args, 0, roots, Path(tmp))
            flood = timed(fleet, args, args.mb, roots, Path(tmp))
        added_ssh = max(flood["ssh"] - empty["ssh"], 1e-3)
        for label in ["ssh"] + [label for label, _ in roots]:
            added = flood[label] - empty[label]
            print(f"{label:10} empty {empty[label]:.2f} s, {args.mb} MB of stderr {flood[label]:.2f} s, "
                  f"the flood adds {added:.2f} s = {added / added_ssh:.2f}x what it adds to ssh", flush=True)
    finally:
        fleet.stop()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("needs root (the sshd fleet)")
    main()
