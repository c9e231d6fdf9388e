"""A real sglang launch per algorithm on a GPU host: the release's parser accepts every flag the repro passes.

The serving interpreter is GPUDIAG_SGLANG_PYTHON (a venv with sglang and its runtime) or this one. The
flags come from that release's own source (sglang_source), the models are the bundled config cut to two
layers with dummy weights, and each server is killed with its whole group afterwards.
"""
import json
import os
import subprocess
import sys

import pytest

from probes.graphrepro import launch_plan, sglang_repro
from probes.sglang_facts import locate
from probes.sglang_source import facts_from_location

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARSER_ERRORS = ("unrecognized arguments", "invalid choice", "expected one argument", "error: argument")


@pytest.fixture(scope="module")
def serving():
    python = os.environ.get("GPUDIAG_SGLANG_PYTHON") or sys.executable
    paths, error = locate.search_paths(python)
    location = None if error else locate.find_package(paths)
    if location is None:
        pytest.skip("no sglang for %s: %s" % (python, error or "not installed"))
    reason = launch_plan.missing_dependency(python)
    if reason:
        pytest.skip(reason)
    return python, facts_from_location(location)


@pytest.mark.parametrize("algorithm", ["EAGLE", "EAGLE3", "DFLASH"])
def test_the_release_starts_with_the_repro_flags(serving, algorithm, tmp_path):
    python, facts = serving
    if algorithm not in facts["speculative_algorithms"]:
        pytest.skip("sglang %s has no %s" % (facts["version"], algorithm))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=visible)
    settings = {"layers": 2, "topk": 1, "tp": 1, "mem_fraction": 0.3}
    cells = sglang_repro.run_launch(settings, algorithm, [1, 2], 4, str(tmp_path), python, facts["server_flags"],
                                    env, facts.get("version"), "", lambda: 600.0)
    log = "\n".join(line for cell in cells for line in cell.get("log_excerpt") or [])
    print(json.dumps([{k: c.get(k) for k in ("batch_size", "status", "detail", "omitted_flags")} for c in cells]))
    assert not [p for p in PARSER_ERRORS if p in log], log[-3000:]
    assert all(c["status"] != "skipped" or "time budget" in c["detail"] for c in cells), cells
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftovers == []
