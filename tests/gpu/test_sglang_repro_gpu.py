"""A real sglang launch per algorithm on a GPU host, at one draft-token value: the release accepts every flag,
the draft receives its hidden states, and every cell has an outcome (an errored or never-run cell fails).

The serving interpreter is GPUDIAG_SGLANG_PYTHON (a venv with sglang and its runtime) or this one. The
flags come from that release's own source (sglang_source), the model is the small bundled config cut to
the algorithm's capturable layers with dummy weights, and each server is killed with its whole group.
With GPUDIAG_GPU_CHECK_OUT set, the cells are written there as sglang-cells.json (scripts/gpu-check.sh).
"""
import json
import os
import subprocess
import sys
import time

import pytest

from probes.graphrepro import configs, launch_plan, sglang_repro
from probes.sglang_facts import locate
from probes.sglang_source import facts_from_location
from tests.gpu import limits

pytestmark = pytest.mark.gpu

PARSER_ERRORS = ("unrecognized arguments", "invalid choice", "expected one argument", "error: argument")
# Outcomes of a launch that ran: anything else (error: the repro's own; skipped: never tested) fails.
RESULTS = ("ok", "capture_failed", "crashed_on_request", "hang", "silent_failure")
DRAFT_TOKENS = 4
_cells = {}


@pytest.fixture(scope="module")
def serving():
    python = os.environ.get("GPUDIAG_SGLANG_PYTHON") or sys.executable
    paths, error = locate.search_paths(python)
    location = None if error else locate.find_package(paths)
    if location is None:
        pytest.skip("no sglang for %s: %s" % (python, error or "not installed"))
    # the launches' own environment: the answer is cached for them, so no launch pays for the import again
    reason = launch_plan.missing_dependency(python, launch_env(), timeout=limits.SGLANG_IMPORT_S)
    if reason:
        pytest.skip(reason)
    yield python, facts_from_location(location)
    out = os.environ.get("GPUDIAG_GPU_CHECK_OUT")
    if out:
        with open(os.path.join(out, "sglang-cells.json"), "w") as fh:
            json.dump(_cells, fh, indent=2, sort_keys=True, default=str)


def launch_env():
    return dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])


def launch(python, facts, algorithm, workdir):
    model = configs.write_model_dir(os.path.join(workdir, "small-model"), configs.SMALL_LLAMA)
    env = launch_env()
    settings = {"layers": 2, "topk": 1, "tp": 1, "mem_fraction": 0.3, "model": model}
    deadline = time.monotonic() + limits.SGLANG_LAUNCH_S
    return sglang_repro.run_launch(settings, algorithm, [1, 2], DRAFT_TOKENS, workdir, python, facts["server_flags"],
                                   env, facts.get("version"), "", lambda: deadline - time.monotonic())


@pytest.mark.parametrize("algorithm", ["EAGLE", "EAGLE3", "DFLASH"])
def test_one_launch_per_algorithm_gives_every_cell_an_outcome(serving, algorithm, tmp_path):
    python, facts = serving
    if algorithm not in facts["speculative_algorithms"]:
        pytest.skip("sglang %s has no %s" % (facts["version"], algorithm))
    cells = launch(python, facts, algorithm, str(tmp_path))
    _cells[algorithm] = [{k: c.get(k) for k in ("batch_size", "draft_tokens", "status", "detail", "launch_s",
                                                "omitted_flags", "config_notes")} for c in cells]
    print(json.dumps(_cells[algorithm]))
    log = "\n".join(line for cell in cells for line in cell.get("log_excerpt") or [])
    assert not [p for p in PARSER_ERRORS if p in log], log[-3000:]
    assert "feature dim mismatch" not in log, log[-3000:]   # the draft got every hidden state it expects
    assert [c["batch_size"] for c in cells] == [1, 2]
    unrun = [c for c in cells if c["status"] not in RESULTS]
    assert unrun == [], unrun   # an error or a skip is no outcome: the check did not happen
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftovers == []
