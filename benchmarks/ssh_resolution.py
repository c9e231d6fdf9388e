"""How long resolving N inventory hosts' ssh settings takes: `ssh -G` asked side by side (what commands do),
`ssh -G` asked one host after another, and gpudiag's own ssh_config reader, on the same inventory and config.

    python benchmarks/ssh_resolution.py [--hosts N] [--repeat R]

An inventory of N hosts (default 1000) and an ssh config with a `Host gpu-*` block, a `Match exec "true"`
block and an `IdentityFile` with tokens; each way resolves every host through load_inventory and the
builder's lookups, exactly as `gpudiag scan all -i INVENTORY` does before it connects. The ways alternate,
so a machine shared with other work slows them alike; prints wall time per way (min and median of R runs)
and the ratios of the minima. Needs `ssh` on PATH and HOME set to the account's home.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpudiag.inventory import load_inventory, resolve_targets  # noqa: E402
from gpudiag.inventory import ssh_openssh  # noqa: E402
from gpudiag.inventory.sshconfig import SshConfig  # noqa: E402

CONFIG = 'Host gpu-*\n  User ops\n  IdentityFile ~/.ssh/id_%h_%r\nMatch exec "true"\n  Port 2222\n'


def resolve(inventory_path: Path, openssh: bool, workers: int) -> float:
    ssh_openssh.WORKERS = workers
    config = SshConfig()
    if openssh:
        ssh_openssh.use_openssh(config)
        assert config.openssh is not None, config.without_openssh
    started = time.perf_counter()
    hosts = resolve_targets(["all"], load_inventory(str(inventory_path), config), ssh_config=config)
    elapsed = time.perf_counter() - started
    assert all(h.port == 2222 and h.user == "ops" for h in hosts), hosts[0]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="gpudiag-sshres-"))
    (workdir / "ssh_config").write_text(CONFIG)
    inventory = workdir / "inventory.yaml"
    inventory.write_text("hosts:\n" + "".join(f"  gpu-{i:05d}: {{}}\n" for i in range(args.hosts)))
    os.environ["GPUDIAG_SSH_CONFIG"] = str(workdir / "ssh_config")
    ways = {
        f"ssh -G, {ssh_openssh.WORKERS} at a time": (True, ssh_openssh.WORKERS),
        "ssh -G, one after another": (True, 1),
        "own ssh_config reader": (False, 1),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, (openssh, workers) in ways.items():
            times[name].append(resolve(inventory, openssh, workers))
    base = min(times["ssh -G, one after another"])
    print(f"{args.hosts} hosts, {os.cpu_count()} CPUs, {args.repeat} runs each (wall s: min / median)")
    for name, values in times.items():
        print(f"  {name:32s} {min(values):7.2f} / {statistics.median(values):7.2f}   x{min(values) / base:.2f}")


if __name__ == "__main__":
    main()
