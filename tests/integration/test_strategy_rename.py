"""A copy strategy's name is spelled once, in probes/copybench/strategies.py: renamed there in a copy of the
tree, the probe measures under the new name, `--set` accepts it, stored data still fits the declared shape, and
the report's tables show it with its caveat — nothing else in the tree needed the old spelling."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from probes.copybench import strategies

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = ('    "loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed", '
               '"installed")')
RENAMES = {"grouped_foreach": "grouped_renamed", "grouped_foreach_size_split": "by_size_renamed"}
TINY = {"device": "cpu", "batch_sizes": "[2]", "hidden_sizes": "[64]", "sweep_min_bytes": "1024",
        "sweep_max_bytes": "16384", "samples": "3", "target_us": "20", "max_iters": "5", "draft_tokens": "4",
        "paths": '["eagle_draft"]'}


def _renamed_tree(dest):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("gpudiag", "probes"):
        shutil.copytree(ROOT / part, dest / part, ignore=ignore)
    path = dest / "probes" / "copybench" / "strategies.py"
    text = path.read_text(encoding="utf-8")
    assert text.count(DECLARATION) == 1, "the strategy names are declared on one line of strategies.py"
    renamed = DECLARATION
    for old, new in RENAMES.items():
        renamed = renamed.replace(f'"{old}"', f'"{new}"')
    path.write_text(text.replace(DECLARATION, renamed), encoding="utf-8")


def _gpudiag(tree, *args):
    # An empty /proc view: a server other work runs on this machine would choose the interpreter.
    (tree / "empty-proc").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, timeout=300,
                          cwd=str(tree), env=dict(os.environ, PYTHONPATH=str(tree),
                                                  GPUDIAG_PROC_ROOT=str(tree / "empty-proc")))


def test_renaming_a_strategy_in_its_declaration_renames_it_everywhere(tmp_path):
    tree, reports = tmp_path / "tree", tmp_path / "reports"
    _renamed_tree(tree)
    expected = tuple(RENAMES.get(name, name) for name in strategies.STRATEGIES)

    options = _gpudiag(tree, "probes", "copy_bench")
    assert options.returncode == 0 and "grouped_renamed" in options.stdout, options.stderr
    sets = [arg for key, value in TINY.items() for arg in ("--set", f"copy_bench.{key}={value}")]
    scan = _gpudiag(tree, "scan", "localhost", "--probes", "copy_bench", "--reports-dir", str(reports), "--json",
                    "--set", "copy_bench.strategies=" + json.dumps(list(expected)), *sets)
    assert scan.returncode in (0, 1), scan.stderr[-2000:]
    run_id = json.loads(scan.stdout)["run_id"]
    [host_file] = (reports / "runs" / run_id / "hosts").glob("*.json")
    probe = json.loads(host_file.read_text())["probes"]["copy_bench"]
    assert probe["status"] == "ok", probe    # the stored data fits the declared shape under the new names
    [workload] = probe["data"]["gpus"][0]["workloads"]
    assert set(workload["strategies"]) == set(expected)

    report = _gpudiag(tree, "report", "--markdown", "--reports-dir", str(reports))
    assert report.returncode in (0, 1, 2, 3), report.stderr[-2000:]
    assert "| grouped_renamed |" in report.stdout
    assert "by_size_renamed (no release ships it)" in report.stdout   # its caveat follows its declaration
    for old in RENAMES:
        assert f"| {old} |" not in report.stdout and f"{old} (" not in report.stdout
