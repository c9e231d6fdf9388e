"""A live one-node Slurm for the engine tests, started and stopped by scripts/start-slurm.sh.

    cluster = SlurmCluster.start(tmp_dir)   # munged, slurmctld, slurmd; returns once the node is idle
    cluster.env(GPUDIAG_REPORTS=...)        # os.environ with SLURM_CONF pointing at it
    cluster.stop()                          # cancels its jobs, stops the three daemons by PID

`unavailable_reason()` says why this machine cannot run it (not root, tools missing); `start` raises
SlurmUnavailable with the script's one line when a daemon fails. Under CI=true both are test failures,
not skips: CI installs Slurm (scripts/test.sh) and must run these tests.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_SCRIPT = ROOT / "scripts" / "start-slurm.sh"
TOOLS = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "scancel", "srun", "sbatch")


class SlurmUnavailable(RuntimeError):
    """This machine cannot run the one-node Slurm; the message says why."""


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "a one-node Slurm needs root (slurmd runs jobs as their users)"
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])   # the daemons live in sbin
    missing = [tool for tool in TOOLS if shutil.which(tool, path=path) is None]
    if missing:
        return f"{', '.join(missing)} not found (apt-get install slurm-wlm munge; scripts/test.sh does)"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip where Slurm cannot run here; under CI, which installs it, that is a failure."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the Slurm tests: {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class SlurmCluster:
    directory: Path
    conf: Path
    node: str

    @classmethod
    def start(cls, directory: Path) -> "SlurmCluster":
        proc = subprocess.run(["bash", str(START_SCRIPT), str(directory)], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            lines = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()
            raise SlurmUnavailable(lines[-1])
        values = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        return cls(directory, Path(values["SLURM_CONF"]), values["NODE"])

    def stop(self) -> None:
        subprocess.run(["bash", str(START_SCRIPT), "--stop", str(self.directory)], capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)

    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
        env.update(SLURM_CONF=str(self.conf), COLUMNS="200", **overrides)
        return env

    def run(self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                              stdin=subprocess.DEVNULL)
