"""scripts/gpu-check.sh fits one call of under nine minutes: its step limits sum to at most 540 s and each sits
above the deadlines of the work inside it; and its rehearsal on a machine without CUDA runs every step.
Here, not in tests/gpu/ (whose tests the conftest skips without CUDA): these run on the CPU, where CI runs."""
import os
import re
import subprocess
import sys

import pytest

from probes.graphrepro import launcher
from tests.gpu import limits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "gpu-check.sh")
TEN_MINUTES = 600
ONE_CALL = 540   # what one device call may take, with room to spare under its ten minutes


def script():
    with open(SCRIPT, encoding="utf-8") as fh:
        return fh.read()


def steps():
    table = re.search(r'^STEPS="\n(.*?)^"', script(), re.S | re.M).group(1)
    rows = [line.split() for line in table.splitlines() if line.strip()]
    return {name: (int(limit), int(deadline)) for name, limit, deadline in rows}


def function(name):
    return re.search(r"^%s\(\) \{\n(.*?)^\}" % name, script(), re.S | re.M).group(1)


def test_step_limits_sum_to_ten_minutes_and_sit_above_their_deadlines():
    table = steps()
    assert list(table) == ["versions", "fast-gpu-tests", "user-path", "copy-bench", "synthetic-repro",
                           "sglang-launches"]
    assert sum(limit for limit, _ in table.values()) <= ONE_CALL
    assert all(deadline < limit for limit, deadline in table.values()), table
    calls = re.findall(r"^run_step (\S+) (\S+)$", script(), re.M)
    assert [name for name, _ in calls] == list(table)   # every step runs, under its own limit


def test_each_steps_own_waits_fit_its_deadline():
    table = steps()
    versions = [int(n) for n in re.findall(r"timeout (\d+) ", function("step_versions"))]
    assert len(versions) == 2 and sum(versions) <= table["versions"][1]
    for step, name in (("copy-bench", "step_copy_bench"), ("synthetic-repro", "step_synthetic_repro")):
        assert '--timeout "$(deadline_of %s)"' % step in function(name)   # the command's own deadline
    user = function("step_user_path")
    assert "gpudiag scan localhost --deep --timeout 130 " in user       # the user's own command
    waits = [int(n) for n in re.findall(r"timeout (\d+) ", user)]
    assert len(waits) == 3 and sum(waits) <= table["user-path"][1]   # the scan's deadline, two reports


def test_the_gpu_tests_waits_fit_their_steps():
    table = steps()
    fast = function("step_fast_gpu_tests")
    assert "test_cuda_graph_gpu.py::test_synthetic_matrix" not in fast   # the 20-minute matrix stays out
    with open(os.path.join(ROOT, "tests", "gpu", "test_cuda_graph_gpu.py"), encoding="utf-8") as fh:
        calls = fh.read().count("timeout=limits.CHILD_CALL_S")
    assert calls == limits.FAST_CHILD_CALLS
    assert limits.FAST_CHILD_CALLS * limits.CHILD_CALL_S <= table["fast-gpu-tests"][1]
    assert limits.SGLANG_STOP_S >= launcher.STOP_GRACE_S
    per_launch = limits.SGLANG_LAUNCH_S + limits.SGLANG_STOP_S
    assert limits.SGLANG_IMPORT_S + limits.GPU_CHECK_LAUNCHES * per_launch <= table["sglang-launches"][1]
    assert '-k "launch_per_algorithm and EAGLE and not EAGLE3"' in function("step_sglang_launches")
    assert "tests/gpu/test_sglang_repro_gpu.py" in function("step_sglang_launches")
    with open(os.path.join(ROOT, "tests", "gpu", "test_sglang_repro_gpu.py"), encoding="utf-8") as fh:
        sglang_test = fh.read()
    assert "timeout=limits.SGLANG_IMPORT_S" in sglang_test              # the one import check, cached
    assert "time.monotonic() + limits.SGLANG_LAUNCH_S" in sglang_test   # each launch's own deadline


def cuda_present():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.skipif(cuda_present(), reason="the rehearsal is for a machine without CUDA")
def test_the_rehearsal_runs_every_step_and_writes_the_summary(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "proc").mkdir()   # no other process on this machine counts as a live server
    env = dict(os.environ, GPU_CHECK_REHEARSE="1", OUT=str(out), GPU_CHECK_WORK=str(tmp_path / "work"),
               PYTHON=sys.executable, GPUDIAG_PROC_ROOT=str(tmp_path / "proc"))
    proc = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=TEN_MINUTES, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    for name, (limit, _) in steps().items():
        assert re.search(r"^%s +\d+ s of +%d s  ok$" % (name, limit), summary, re.M), summary
    assert "fast GPU tests: 0 passed, 0 failed, 0 errors" in summary
    assert "synthetic repro: cells skipped" in summary and "no CUDA device" in summary
    assert "sglang launches: none ran: needs a CUDA GPU" in summary
    # Nothing measured: a rehearsal names every missing figure (a GPU run fails on them).
    assert re.search(r"^figures user-path +MISSING: .*cuda_graph: no cell measured", summary, re.M), summary
    assert re.search(r"^figures sglang-launches +ok$", summary, re.M), summary   # no runtime was expected
    assert "user path cuda_graph: ok" in summary
    assert len(os.listdir(str(out))) <= 8   # what a device run brings back
    assert {"gpu-check.log", "summary.txt", "copy-bench.json", "synthetic-repro.json", "user-path.json",
            "user-path-report.json"} <= set(os.listdir(str(out)))


def test_the_summary_reads_a_real_copy_bench_result(tmp_path):
    """copy_bench measured on the CPU through the real CLI: the summary names each device, what it measured
    and what its budget lost, from the probe's own data shape."""
    reports = tmp_path / "reports"
    argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "copy_bench", "--reports-dir",
            str(reports), "--set", "copy_bench.device=cpu", "--set", "copy_bench.batch_sizes=[1]",
            "--set", "copy_bench.hidden_sizes=[64]", "--set", "copy_bench.samples=3",
            "--set", "copy_bench.sweep_max_bytes=4096", "--set", "copy_bench.max_iters=5"]
    (tmp_path / "proc").mkdir()
    scan = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, GPUDIAG_PROC_ROOT=str(tmp_path / "proc")))
    assert scan.returncode in (0, 1), scan.stderr
    out = tmp_path / "out"
    out.mkdir()
    run = (reports / "latest").read_text().strip()
    (out / "copy-bench.json").write_text((reports / "runs" / run / "hosts" / "localhost.json").read_text())
    (tmp_path / "steps.tsv").write_text("copy-bench\t75\t9\t0\nsglang-launches\t240\t300\t124\n")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu_check_summary.py"),
                           str(tmp_path / "steps.tsv"), str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1   # a step past its limit fails the check
    assert re.search(r"^sglang-launches +300 s of +240 s  TIMED OUT$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^copy_bench GPU None cpu: ok, 3 workloads measured, best \S+; lost to budget: none$",
                     proc.stdout, re.M), proc.stdout
