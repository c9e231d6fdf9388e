"""Control-side cost of a scan as the fleet grows: `gpudiag scan` against `ansible -m script` with the bundle,
and (--replay) gpudiag alone over 1,000 or 10,000 in-process hosts.

    python benchmarks/fleet_scale.py [--sizes 1,4,16,32,64] [--forks 32] [--no-ansible]
    python benchmarks/fleet_scale.py --replay 1000,10000 [--replay-forks 32,256,1024] [--vary]

--replay: no sshd; every host is answered at once by a transport replaying one recorded host's frame
(tests/fixtures/runs/fleet3/hosts/gpu-a.json, benchmarks/fleet_support.py), so what is measured is the control
side's own work per host: payload, capture, frame, validation, store, summary, then the read-back for findings.
Each `gpudiag scan` runs in a child of its own; its CPU and peak RSS are the kernel's (wait4), its scan phase
(up to the last host stored) is read inside it. Then `gpudiag report -o FILE.md` on the stored run, the same way,
reading what the scan kept of each host (gpudiag/derived_files.py), and again from the host files alone
(GPUDIAG_DERIVED_FILES=0), with whether the two reports and appendices are the same bytes.

Starts the largest fleet of real sshd hosts on 127.0.0.2... once (the integration fixture's SSHDFleet) and
scans the first N of them with each tool, light probe (`env` without importing torch, so the hosts'
own work stays small on this shared machine). Measured on the control side only, as each tool's whole
process tree: wall time, CPU seconds (user+sys of the tool and every process it waited for, plus
Ansible's ssh ControlPersist masters, read from /proc before they are stopped) and peak memory (the
largest sum of PSS over the tree, sampled every 0.1 s). The hosts' sshd and probe processes are not
children of either tool and are not counted. Prints per-host figures and Ansible/gpudiag ratios.
Needs root, openssh-server and ansible-core (`pip install ansible-core`, a benchmark-only dependency).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fleet_support import load_fleet_module  # noqa: E402

BUNDLE_ARGS = ["--probes", "env", "--set", "env.torch=false"]


@dataclass
class Cost:
    wall_s: float
    cpu_s: float
    peak_mib: float
    ok_hosts: int


def _tree(root: int) -> list[int]:
    return [root] + load_fleet_module().descendants({root})


def _pss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _masters(marker: str) -> list[int]:
    """ssh ControlPersist masters whose command line names our control-path dir (daemonised, so not waited)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and cmdline.startswith("ssh"):
                found.append(int(entry))
    return found


def measure(argv: list[str], env: dict[str, str], cwd: Path, master_marker: str | None = None) -> tuple[Cost, str]:
    peak = [0.0]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            pids = _tree(proc.pid) + (_masters(master_marker) if master_marker else [])
            peak[0] = max(peak[0], sum(_pss_mib(p) for p in pids))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    chunks = []
    assert proc.stdout is not None
    for chunk in iter(lambda: proc.stdout.read(65536), b""):
        chunks.append(chunk)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    cpu = usage.ru_utime + usage.ru_stime
    if master_marker:
        for pid in _masters(master_marker):
            cpu += _cpu_s(pid)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    return Cost(wall, cpu, peak[0], 0), b"".join(chunks).decode(errors="replace")


def gpudiag_cost(fleet, work: Path, names: list[str], forks: int) -> Cost:
    inventory = fleet.write_inventory(work / f"inv-{len(names)}.yaml", names)
    reports = Path(tempfile.mkdtemp(dir=work, prefix="reports-"))
    argv = fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", *BUNDLE_ARGS, "--forks", str(forks),
                                   "--timeout", "300", "--json"]
    cost, out = measure(argv, fleet.env(GPUDIAG_REPORTS=str(reports)), work)
    cost.ok_hosts = sum(h["status"] == "ok" for h in json.loads(out)["hosts"])
    return cost


def ansible_cost(fleet, work: Path, names: list[str], forks: int, bundle: Path) -> Cost:
    inventory = fleet.write_inventory(work / f"ainv-{len(names)}.yaml", names, form="ansible")
    doc = yaml.safe_load(inventory.read_text())
    doc["all"]["vars"] = {"ansible_ssh_common_args": f"-o UserKnownHostsFile={fleet.known_hosts} "
                                                     "-o StrictHostKeyChecking=yes"}
    inventory.write_text(yaml.safe_dump(doc))
    control_dir = Path(tempfile.mkdtemp(dir=work, prefix="cp-"))
    # The fleet's sshd has no sftp subsystem: piped transfers, instead of two failing fallbacks per host.
    env = fleet.env(ANSIBLE_SSH_TRANSFER_METHOD="piped", ANSIBLE_SSH_CONTROL_PATH_DIR=str(control_dir),
                    ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1",
                    ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"))
    argv = ["ansible", "all", "-i", str(inventory), "-f", str(forks), "-m", "script",
            "-a", " ".join([str(bundle)] + BUNDLE_ARGS)]
    cost, out = measure(argv, env, work, master_marker=str(control_dir))
    hosts = json.loads(out[out.index("{"):])["plays"][0]["tasks"][0]["hosts"]
    cost.ok_hosts = sum("GPUDIAG-END" in str(r.get("stdout", "")) for r in hosts.values())
    return cost


def per_host(cost: Cost, n: int) -> str:
    return (f"{cost.wall_s:7.2f} {cost.cpu_s:7.2f} {cost.cpu_s / n:8.3f} {cost.peak_mib:8.1f} "
            f"{cost.peak_mib / n:7.2f} {cost.ok_hosts:3d}/{n}")


def waited(argv: list[str], cwd: Path, tree: list[float] | None = None,
           env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """(wall s, cpu s, peak RSS MiB, exit code) of a child, from the kernel's accounting (the peak is its largest
    process's). With `tree`, the largest sum of PSS over the child and its descendants (`gpudiag report`'s
    worker processes), sampled every 0.05 s, is appended to it. `env`: set for the child besides os.environ."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], sum(_pss_mib(pid) for pid in _tree(proc.pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    if tree is not None:
        sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    if tree is not None:
        sampler.join()
        tree.append(peak[0])
    return (time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status))


DECODE_AND_DROP = """import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    json.loads(path.read_text(encoding="utf-8"))
"""


def lines_of(argv: list[str], cwd: Path) -> int:
    """How many lines a command prints on stdout (a console report 120 columns wide)."""
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, COLUMNS="120"))
    return len(out.stdout.splitlines())


def replay(sizes: list[int], forks_list: list[int], vary: bool = False) -> int:
    from fleet_support import write_inventory
    work = Path(tempfile.mkdtemp(prefix="gpudiag-replay-"))
    os.environ["GPUDIAG_STATE"] = str(work / "state")  # the key sealing kept derivations: the benchmark's own
    print(f"replayed frame: tests/fixtures/runs/fleet3/hosts/gpu-a.json{', varied per host' if vary else ''}; "
          f"cpu_count {os.cpu_count()}")
    print(f"{'hosts':>6} {'forks':>5} | scan: {'wall_s':>7} {'cpu_s':>7} {'ms/host':>7} {'peak_MiB':>8} | "
          f"before read-back: {'wall_s':>7} {'peak_MiB':>8} | report: {'wall_s':>7} {'cpu_s':>7} {'peak_MiB':>8} {'tree_PSS':>8} | "
          f"from files: {'wall_s':>7} {'cpu_s':>7} {'peak_MiB':>8} {'bytes':>6} | "
          f"decode-and-drop: {'wall_s':>7} {'peak_MiB':>8} | lines: {'console':>7} {'md':>5}")
    try:
        for n in sizes:
            inventory = write_inventory(work / f"inv-{n}.yaml", n)
            for forks in forks_list:
                reports, stats = work / f"rep-{n}-{forks}", work / f"stats-{n}-{forks}.json"
                child = [sys.executable, str(ROOT / "benchmarks" / "fleet_support.py"), "replay-child",
                         str(inventory), str(reports), str(forks), str(stats)] + (["vary"] if vary else [])
                wall, cpu, peak, code = waited(child, work)
                phase = json.loads(stats.read_text()) if stats.exists() else {}
                report, dropped, console, markdown = (0.0, 0.0, 0.0, -1), (0.0, 0.0, 0.0, -1), 0, 0
                from_files, same = (0.0, 0.0, 0.0, -1), False
                tree_pss: list[float] = []
                if phase.get("run_dir"):
                    md, files_md = (work / side / f"report-{n}-{forks}.md" for side in ("kept", "files"))
                    md.parent.mkdir(exist_ok=True)
                    files_md.parent.mkdir(exist_ok=True)
                    report = waited([sys.executable, "-m", "gpudiag", "report", phase["run_dir"], "--no-charts",
                                     "-o", str(md)], ROOT, tree_pss)
                    # The same report with the scan's kept derivations unused: every host file read and derived.
                    from_files = waited([sys.executable, "-m", "gpudiag", "report", phase["run_dir"], "--no-charts",
                                         "-o", str(files_md)], ROOT, env={"GPUDIAG_DERIVED_FILES": "0"})
                    same = all(a.exists() and a.read_bytes() == b.read_bytes() for a, b in (
                        (md, files_md), (md.with_suffix(".appendix.md"), files_md.with_suffix(".appendix.md"))))
                    # The floor: each host file decoded and dropped, nothing kept.
                    dropped = waited([sys.executable, "-c", DECODE_AND_DROP, str(Path(phase["run_dir"]) / "hosts")],
                                     ROOT)
                    console = lines_of([sys.executable, "-m", "gpudiag", "report", phase["run_dir"]], ROOT)
                    markdown = len(md.read_text().splitlines()) if md.exists() else 0
                print(f"{n:6d} {forks:5d} | scan: {wall:7.1f} {cpu:7.1f} {1000 * cpu / n:7.2f} {peak:8.0f} | "
                      f"before read-back: {phase.get('scan_wall_s', 0):7.1f} {phase.get('scan_peak_mib', 0):8.0f} | "
                      f"report: {report[0]:7.1f} {report[1]:7.1f} {report[2]:8.0f} {(tree_pss or [0.0])[0]:8.0f} | "
                      f"from files: {from_files[0]:7.1f} {from_files[1]:7.1f} {from_files[2]:8.0f} "
                      f"{'same' if same else 'DIFFER':>6} | "
                      f"decode-and-drop: {dropped[0]:7.1f} {dropped[2]:8.0f} | lines: {console:7d} {markdown:5d}"
                      + ("" if code == 0 and report[3] in (0, 1, 3, 4) else f"  (exit {code}, report {report[3]})"),
                      flush=True)
                shutil.rmtree(reports, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16,32,64")
    parser.add_argument("--forks", type=int, default=32)
    parser.add_argument("--no-ansible", action="store_true")
    parser.add_argument("--replay", help="host counts for the in-process replay fleet, e.g. 1000,10000")
    parser.add_argument("--replay-forks", default="32,256,1024")
    parser.add_argument("--vary", action="store_true",
                        help="with --replay: every host answers with its own GPU UUIDs, PIDs and measured values "
                        "(benchmarks/fleet_support.py varied_body), so no two hosts agree")
    args = parser.parse_args()
    if args.replay:
        return replay([int(s) for s in args.replay.split(",")], [int(f) for f in args.replay_forks.split(",")],
                      args.vary)
    sizes = [int(s) for s in args.sizes.split(",")]
    use_ansible = not args.no_ansible and shutil.which("ansible") is not None
    fleet = load_fleet_module().SSHDFleet(max(sizes)).start()
    work = Path(tempfile.mkdtemp(prefix="gpudiag-scale-"))
    try:
        bundle = work / "gpudiag-probes.pyz"
        subprocess.run(fleet.gpudiag_argv() + ["bundle", "-o", str(bundle)], check=True, capture_output=True)
        print(f"forks {args.forks}; light probe: {' '.join(BUNDLE_ARGS)}; cpu_count {os.cpu_count()}")
        header = "   wall_s   cpu_s cpu/host peak_MiB MiB/host  ok"
        print(f"{'hosts':>5} {'tool':8}{header}   ratio ansible/gpudiag (wall, cpu, peak)")
        for n in sizes:
            names = [h.name for h in fleet.hosts[:n]]
            g = gpudiag_cost(fleet, work, names, args.forks)
            print(f"{n:5d} {'gpudiag':8}{per_host(g, n)}", flush=True)
            if use_ansible:
                a = ansible_cost(fleet, work, names, args.forks, bundle)
                ratios = f"{a.wall_s / g.wall_s:5.2f} {a.cpu_s / g.cpu_s:5.2f} {a.peak_mib / max(g.peak_mib, 0.1):5.2f}"
                print(f"{n:5d} {'ansible':8}{per_host(a, n)}   {ratios}", flush=True)
    finally:
        fleet.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
