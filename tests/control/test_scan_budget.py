"""GPU probes' limits planned inside a user's --timeout: they share the room the light probes leave, in proportion
to their declared limits, and the scan says so; without --timeout (or when they fit) each keeps its own."""
import os
import subprocess
import sys

from gpudiag.budget import LIGHT_RESERVE_S, planned_limits
from gpudiag.bundle import PROBE_TIMEOUTS


def test_limits_that_fit_are_kept_and_others_share_the_room():
    declared = {"copy_bench": 900.0, "cuda_graph": 1200.0}
    assert planned_limits(declared, None) == declared
    assert planned_limits(declared, 3000.0) == declared
    planned = planned_limits(declared, 230.0)
    room = 230.0 - 20.0 - LIGHT_RESERVE_S
    assert abs(sum(planned.values()) - room) < 0.2                      # together they fill the room, no more
    assert abs(planned["cuda_graph"] / planned["copy_bench"] - 1200 / 900) < 0.01


def test_a_deep_scan_with_a_short_timeout_says_how_the_gpu_probes_share_it(tmp_path):
    (tmp_path / "proc").mkdir()
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--deep", "--timeout", "230",
                           "--reports-dir", str(tmp_path / "reports"), "--set",
                           f"deployment.proc_root={tmp_path / 'proc'}"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="300"))
    assert "Traceback" not in proc.stderr
    planned = planned_limits({p: PROBE_TIMEOUTS[p] for p in ("copy_bench", "cuda_graph")}, 230.0)
    line = " ".join(proc.stderr.split())
    assert "--timeout 230 s: the GPU probes share what the light probes leave" in line
    assert f"copy_bench {planned['copy_bench']:.0f} s of its {PROBE_TIMEOUTS['copy_bench']:.0f} s" in line
