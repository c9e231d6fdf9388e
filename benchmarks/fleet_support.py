"""What the fleet benchmarks share: the integration tests' sshd fleet, used as a plain module."""
from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def load_fleet_module():
    """tests/integration/conftest.py imported as a plain module (no pytest session): SSHDFleet, descendants."""
    spec = importlib.util.spec_from_file_location("gpudiag_sshd_fleet", ROOT / "tests" / "integration" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# -- an in-process fleet: a transport that replays a recorded host's frame ------------------------------
RECORDED_HOST = ROOT / "tests" / "fixtures" / "runs" / "fleet3" / "hosts" / "gpu-a.json"


def recorded_frame_body(path: Path = RECORDED_HOST) -> str:
    """The runner's document for a stored host (its probes as recorded), as the JSON line a frame carries."""
    import json

    stored = json.loads(path.read_text())
    return json.dumps({"schema": 1, "python": {"executable": stored.get("python")}, "probes": stored["probes"]})


_FLOAT = re.compile(r"(?<=[:\[ ])-?\d+\.\d+(?:[eE][-+]?\d+)?")
_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PER_HOST_INT = re.compile(r'("(?:pid|memory_used_mib|used_memory_mib|utilization_pct|memory_available_mib)": )(\d+)')


def varied_body(body: str, index: int) -> str:
    """The recorded frame as host `index` would send it: its own GPU UUIDs and hostname, its own measured
    values (every float: timings, spreads, durations, scaled by a factor of its own within 0.95-1.05, so a
    percentile stays below the next), its own PIDs, memory in use and utilisation. No two hosts' probe data
    agree, nor any probe's, so nothing is shared by grouping."""
    factor = 0.95 + (index * 7919 % 100003) / 1000030

    def scaled(match: re.Match) -> str:
        return repr(round(float(match.group()) * factor, 7))

    out = _FLOAT.sub(scaled, body)
    out = _UUID.sub(lambda m: f"GPU-{index:08x}-{m.group()[4:8]}-4000-8000-{index * 977:012x}", out)
    out = _PER_HOST_INT.sub(lambda m: m.group(1) + str(int(m.group(2)) + index % 997), out)
    return out.replace('"hostname": "', f'"hostname": "h{index:05d}-', 1)


class ReplayTransport:
    """Answers every run with the recorded frame under that run's nonce, at once: what the control side does
    per host (payload, capture, frame, validation, store) without a network or a host. With `vary`, each host
    answers with its own values (varied_body)."""

    body = ""
    vary = False

    def __init__(self, host: object, **_options: object):
        self.host = host

    def run(self, argv: list, stdin: bytes, timeout: float, output_limit: int | None = None, events: object = None):
        import json

        from gpudiag.models import CommandResult

        nonce = json.loads(stdin.split(b"\n", 1)[0])["nonce"]
        body = varied_body(self.body, int(str(getattr(self.host, "name", "h0"))[1:] or 0)) if self.vary else self.body
        frame = f"GPUDIAG-BEGIN {nonce}\n{body}\nGPUDIAG-END {nonce}\n".encode()
        return CommandResult(0, frame, b"", 0.0)

    def close(self) -> None:
        pass


def write_inventory(path: Path, count: int) -> Path:
    """gpudiag's inventory form with `count` ssh hosts named h00000...; the replay transport answers for them."""
    lines = ["hosts:"] + [f"  h{n:05d}:\n    address: 10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay_child(inventory: str, reports: str, forks: str, stats: str, vary: str = "") -> int:
    """`gpudiag scan -i INVENTORY all` in this process, every host answered by ReplayTransport. Writes to
    STATS the peak RSS and time when the last host was stored, before scan judges the run for findings."""
    import json
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    import gpudiag.cli.scan as scan_cli
    from gpudiag.cli import cli

    ReplayTransport.body = recorded_frame_body()
    ReplayTransport.vary = vary == "vary"
    scan_cli.transports = lambda **options: ReplayTransport  # type: ignore[assignment]
    read_back = scan_cli._stored_run
    started = time.perf_counter()
    phase: dict = {}

    def stored_run(run_dir, console, **folded):  # type: ignore[no-untyped-def]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        phase.update(scan_wall_s=time.perf_counter() - started, scan_peak_mib=usage.ru_maxrss / 1024,
                     scan_cpu_s=usage.ru_utime + usage.ru_stime, run_dir=str(run_dir))
        return read_back(run_dir, console, **folded)

    scan_cli._stored_run = stored_run  # type: ignore[assignment]
    argv = ["scan", "-i", inventory, "all", "--forks", forks, "--reports-dir", reports]
    code = cli.main(argv, standalone_mode=False)
    Path(stats).write_text(json.dumps(dict(phase, exit=code)))
    return 0


if __name__ == "__main__" and len(sys.argv) in (6, 7) and sys.argv[1] == "replay-child":
    sys.exit(replay_child(*sys.argv[2:]))
