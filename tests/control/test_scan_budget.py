"""A deep scan inside a short --timeout: the control side splits nothing; the host's runner hands its time out
as the probes run, the scan says so before and says after what each GPU probe was given (as the runner reported
it), and what one long probe leaves unused reaches the next."""
import glob
import json
import os
import subprocess
import sys

from gpudiag.budget import given, given_lines, plan_line
from gpudiag.bundle import PROBE_TIMEOUTS
from gpudiag.models import ProbeResult


def test_the_plan_and_what_each_probe_got_are_worded_from_the_runners_limits():
    declared = {"copy_bench": 900.0, "cuda_graph": 1200.0}
    assert plan_line(declared, None) is None and plan_line(declared, 3000.0) is None
    assert "copy_bench up to 900 s, cuda_graph up to 1200 s" in plan_line(declared, 130.0)
    probes = {"copy_bench": ProbeResult("ok", 9.3, limit_s=42.4, declared_s=900.0),
              "cuda_graph": ProbeResult("ok", 14.6, limit_s=89.1, declared_s=1200.0),
              "env": ProbeResult("ok", 1.0, limit_s=110.0, declared_s=120.0)}
    assert given(probes) == ["copy_bench given 42 s of its 900 s, used 9 s",
                             "cuda_graph given 89 s of its 1200 s, used 15 s",
                             "env given 110 s of its 120 s, used 1 s"]
    assert given({"env": ProbeResult("ok", 1.0)}) == []   # an older runner reports no limits
    many = given_lines([(f"h{n}", probes) for n in range(7)])
    assert len(many) == 6 and many[-1] == "and 2 more host(s) whose GPU probes got less than declared"


def test_a_deep_scan_with_a_short_timeout_hands_unused_time_to_the_next_gpu_probe(tmp_path):
    (tmp_path / "proc").mkdir()
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--deep", "--timeout", "130",
                           "--reports-dir", str(reports), "--set", f"deployment.proc_root={tmp_path / 'proc'}"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="300"))
    assert "Traceback" not in proc.stderr
    line = " ".join(proc.stderr.split())
    assert "--timeout 130 s is less than the GPU probes declare" in line
    [path] = glob.glob(str(reports / "runs" / "*" / "hosts" / "localhost.json"))
    probes = json.load(open(path, encoding="utf-8"))["probes"]
    bench, graph = probes["copy_bench"], probes["cuda_graph"]
    assert bench["declared_s"] == PROBE_TIMEOUTS["copy_bench"] and graph["declared_s"] == PROBE_TIMEOUTS["cuda_graph"]
    # copy_bench ran first with its share of the time then left; cuda_graph got more than its share of the
    # same time: what copy_bench left unused went on to it.
    room = bench["limit_s"] * (PROBE_TIMEOUTS["copy_bench"] + PROBE_TIMEOUTS["cuda_graph"]) / PROBE_TIMEOUTS["copy_bench"]
    assert graph["limit_s"] > room * PROBE_TIMEOUTS["cuda_graph"] / (PROBE_TIMEOUTS["copy_bench"]
                                                                   + PROBE_TIMEOUTS["cuda_graph"])
    assert graph["limit_s"] >= room - bench["duration_s"] - 1.0
    assert f"localhost: copy_bench given {bench['limit_s']:.0f} s of its 900 s" in line
    assert f"cuda_graph started (given {graph['limit_s']:.0f} s of its 1200 s)" in line   # as the host decided
    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", "--reports-dir", str(reports), "--markdown"],
                            capture_output=True, text=True, timeout=120)
    assert f"cuda_graph {graph['status']} ({graph['duration_s']:.1f} s, given {graph['limit_s']:.0f} s of its 1200 s" \
        in report.stdout, report.stdout[-3000:]
