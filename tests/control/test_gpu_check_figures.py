"""scripts/gpu-check.sh's figure checks (scripts/gpu_check_figures.py): each step fails when its figures are
missing. Fed the recorded H200 runs (tests/fixtures/recorded/h200-2026-12-04, the tool's own stored runs):
the deep scan at --timeout 130 (cuda_graph refused every cell, then lost its data) fails; the good run at
--timeout 280 passes the checks that read copy_bench and cuda_graph data; a copy_bench that timed no GPU and
no sglang launch where a runtime was expected fail too."""
import copy
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(ROOT, "tests", "fixtures", "recorded", "h200-2026-12-04")
SUMMARY = os.path.join(ROOT, "scripts", "gpu_check_summary.py")


def _figures():
    spec = importlib.util.spec_from_file_location("gpu_check_figures",
                                                  os.path.join(ROOT, "scripts", "gpu_check_figures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


figures = _figures()


def run_dir(name):
    [path] = glob.glob(os.path.join(RECORDED, name, "runs", "*"))
    return path


def host(name):
    with open(os.path.join(run_dir(name), "hosts", "localhost.json"), encoding="utf-8") as fh:
        return json.load(fh)


def report(name):
    result = CliRunner().invoke(cli, ["report", run_dir(name), "--json"])
    assert result.exit_code in (0, 1, 4), result.output[-2000:]
    return json.loads(result.stdout)


def test_the_recorded_deep_scan_at_130_s_fails_its_figures():
    doc = host("deep-timeout-130")
    problems = figures.cuda_graph_problems(doc)
    assert problems and "cells[0].algorithm: missing" in problems[0]
    answers = figures.answer_problems(report("deep-timeout-130"))
    # Q5 states the 20 workloads copy_bench timed there; Q6 is lost with the probe whose data misfit
    assert [p.split(":")[0] for p in answers] == ["Q6"]
    assert figures.copy_bench_problems(doc) == []   # copy_bench did time its 20 workloads there


def test_the_recorded_good_run_passes_the_checks_on_its_measured_data():
    doc = host("deep-timeout-280")
    assert figures.copy_bench_problems(doc) == []
    assert figures.cuda_graph_problems(doc) == []
    assert len(figures.timed_workloads(doc["probes"]["copy_bench"]["data"]["gpus"][0])) == 20
    assert figures.answer_problems(report("deep-timeout-280"), ids=("Q6",)) == []


def test_a_copy_bench_that_timed_no_gpu_fails():
    doc = copy.deepcopy(host("deep-timeout-280"))
    gpu = doc["probes"]["copy_bench"]["data"]["gpus"][0]
    for workload in gpu["workloads"]:
        workload["status"] = "skipped"
    gpu["status"] = "timeout"
    assert figures.copy_bench_problems(doc) == ["copy_bench GPU 0: no timed workload (timeout)"]
    # The recorded copy_bench run with sglang importable lost its data to a misfit: no figure at all.
    [problem] = figures.copy_bench_problems(host("copy-bench-sglang-0.5.23-timeout-90"))
    assert problem.startswith("copy_bench: error: its data does not fit its declaration")


def test_a_cell_without_an_outcome_or_none_measured_fails():
    doc = copy.deepcopy(host("deep-timeout-280"))
    cells = doc["probes"]["cuda_graph"]["data"]["cells"]
    del cells[3]["status"]
    assert figures.cuda_graph_problems(doc) == ["cuda_graph cell eagle_draft bs=64 draft=16: no outcome (None)"]
    for cell in cells:
        cell["status"] = "skipped"
    assert figures.cuda_graph_problems(doc)[-1].startswith("cuda_graph: no cell measured")


@pytest.mark.parametrize("status, fails", [("answered", False), ("not checked", True), ("partly", False)])
def test_q5_fails_only_when_not_checked(status, fails):
    answers = {"answers": {"questions": [{"id": "Q5", "answers": [{"status": status, "answer": "GPU 0 ..."}]},
                                         {"id": "Q6", "answers": [{"status": "answered", "answer": "no break"}]}]}}
    assert bool(figures.answer_problems(answers)) is fails
    assert figures.answer_problems({"answers": {"questions": []}}) == ["Q5: no answer", "Q6: no answer"]


def test_zero_sglang_launches_fail_only_where_a_runtime_was_expected():
    assert figures.sglang_launch_problems(None, expected=True) == [
        "sglang launches: none ran, though an sglang runtime was expected"]
    assert figures.sglang_launch_problems({}, expected=False) == []
    ran = {"EAGLE": [{"batch_size": 1, "status": "ok"}, {"batch_size": 2, "status": "skipped"}]}
    assert figures.sglang_launch_problems(ran, expected=True) == ["sglang cell bs=2: no outcome ('skipped')"]


def test_the_user_path_step_fails_on_the_recorded_130_s_run_through_the_summary(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(os.path.join(run_dir("deep-timeout-130"), "hosts", "localhost.json"), out / "user-path.json")
    (out / "user-path-report.json").write_text(json.dumps(report("deep-timeout-130")))
    env = dict(os.environ, REHEARSE="0")
    check = subprocess.run([sys.executable, SUMMARY, "--check", "user-path", str(out)], capture_output=True,
                           text=True, timeout=60, env=env)
    assert check.returncode == 1, check.stdout
    assert "FIGURES MISSING: cuda_graph: error" in check.stdout and "FIGURES MISSING: Q6: not checked" in check.stdout
    assert "Q5: not checked" not in check.stdout
    (tmp_path / "steps.tsv").write_text("user-path\t160\t24\t1\n")
    summary = subprocess.run([sys.executable, SUMMARY, str(tmp_path / "steps.tsv"), str(out)], capture_output=True,
                             text=True, timeout=60, env=env)
    assert summary.returncode == 1
    assert "user path copy_bench: ok in 9.3 s" in summary.stdout and "timed workloads: GPU 0 20" in summary.stdout
    assert "figures user-path        MISSING: cuda_graph: error" in summary.stdout
