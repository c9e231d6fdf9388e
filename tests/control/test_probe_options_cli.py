"""Probe options declared beside the probes: `--set` checked before connecting, `gpudiag probes`, and the
generated docs/probe-options.md, all through the CLI."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from probes.copybench import options as copy_bench_options
from probes.probe_info import PROBES

ROOT = Path(__file__).resolve().parents[2]
# Nothing listens on port 1 of this address: were the scan to connect, it would report the host unreachable.
NOWHERE = "nobody@127.0.0.1:1"


def gpudiag(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=cwd)


@pytest.mark.parametrize("settings, message", [
    (["copy_bench.batch_sizes=oops"],
     "--set copy_bench.batch_sizes: expected a list of integers ≥ 1, e.g. [1,8], got 'oops'"),
    (["copy_bench.batch_sizes=[0]"], "--set copy_bench.batch_sizes: expected a list of integers ≥ 1"),
    (["copy_bench.graph=maybe"], "--set copy_bench.graph: expected true or false, got 'maybe'"),
    (["copy_bench.paths=eagle_draft,nope"], "expected a list of eagle_draft, eagle_draft_extend, dflash_verify"),
    (["copy_bench.bacth_sizes=[1]"], "--set copy_bench.bacth_sizes: unknown option (copy_bench options: device,"),
    (["copybench.batch_sizes=[1]"], "unknown probe copybench (probes: deployment, env, torch_caps, sglang_source,"),
    (["cuda_graph.tp=2"], "probe cuda_graph is not selected (selected: deployment, sglang_source, copy_bench; "
                          "add it with --probes or --deep)"),
    (["copy_bench.target_us=1e309"], "--set copy_bench.target_us: expected a number ≥ 0"),
    (["copy_bench"], "--set 'copy_bench': expected PROBE.KEY=VALUE"),
])
def test_a_bad_set_exits_2_before_any_connection(tmp_path, settings, message):
    args = ["scan", NOWHERE, "--probes", "copy_bench", "--reports-dir", str(tmp_path / "reports")]
    for item in settings:
        args += ["--set", item]
    proc = gpudiag(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "reports").exists()      # no run was started: nothing connected


def test_options_of_probes_a_selection_brings_along_are_accepted():
    from probes.probe_info import check_settings
    checked = check_settings({"deployment": {"proc_root": "/tmp/p"}, "copy_bench": {"batch_sizes": "1,8",
                                                                                    "graph": "false"}},
                             ["deployment", "sglang_source", "copy_bench"])
    assert checked == {"deployment": {"proc_root": "/tmp/p"},
                       "copy_bench": {"batch_sizes": [1, 8], "graph": False}}


def test_values_are_normalised_to_what_the_probe_reads():
    from probes.probe_info import SettingError, check_settings
    checked = check_settings({"cuda_graph": {"algorithms": "dflash,eagle3", "draft_tokens": [2, 8]},
                              "torch_caps": {"cuda": False}}, ["torch_caps", "cuda_graph"])
    assert checked == {"cuda_graph": {"algorithms": ["DFLASH", "EAGLE3"], "draft_tokens": [2, 8]},
                       "torch_caps": {"cuda": "false"}}
    for bad, words in [({"cuda_graph": {"draft_tokens": [4]}}, "expected a list of 2 integers ≥ 1"),
                       ({"sglang_source": {"flag_pattern": "graph("}}, "expected a Python regular expression"),
                       ({"cuda_graph": {"model": ""}}, "expected a path on the host, or null")]:
        with pytest.raises(SettingError, match=re.escape(words)):
            check_settings(bad, ["sglang_source", "cuda_graph"])


def test_every_default_passes_its_own_check_and_the_probes_use_the_declared_defaults():
    for info in PROBES.values():
        for option in info.options:
            assert option.check(option.default, info.name) == option.default, (info.name, option.name)
            assert option.help.endswith(".") and len(option.help) < 140
    settings, _ = copy_bench_options.resolve({}, "cuda")
    declared = {o.name: o.default for o in PROBES["copy_bench"].options}
    assert set(settings) == set(declared)
    from probes import cuda_graph
    assert cuda_graph.settings_from({})["batch_sizes"] == PROBES["cuda_graph"].option("batch_sizes").default


def test_probes_lists_needs_cost_and_options():
    proc = gpudiag("probes", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {p["name"]: p for p in json.loads(proc.stdout)}
    assert list(listed) == ["deployment", "env", "torch_caps", "sglang_source", "copy_bench", "cuda_graph",
                            "servingbench"]
    assert listed["servingbench"]["set"] == "explicit" and "gpudiag bench" in listed["servingbench"]["cost"]
    assert listed["cuda_graph"]["needs"] == {"GPU": "yes", "torch": "yes", "sglang": "optional"}
    assert listed["copy_bench"]["set"] == "deep" and "900 s" in listed["copy_bench"]["cost"]
    assert listed["cuda_graph"]["timeout_s"] == 1200 and listed["cuda_graph"]["unit_s"]["synthetic cell"] == 1.2
    assert "one synthetic cell ~1.2 s" in listed["cuda_graph"]["cost"]
    batch = [o for o in listed["copy_bench"]["options"] if o["name"] == "batch_sizes"][0]
    assert batch["default"] == [1, 8, 32, 128] and batch["kind"] == "int_list"
    proc = gpudiag("probes", "copy_bench")
    assert proc.returncode == 0 and "sweep_max_bytes" in proc.stdout and "copy_bench options" in proc.stdout
    proc = gpudiag("probes", "nope")
    assert proc.returncode == 2 and proc.stderr.startswith("gpudiag: error: unknown probe nope")


def test_every_gpu_probe_reads_the_one_busy_threshold_of_the_gpu_layer():
    from probes import gpu_layer
    for name in ("torch_caps", "copy_bench", "cuda_graph"):
        [option] = [o for o in PROBES[name].options if o.name == "busy_memory_mib"]
        assert option is gpu_layer.BUSY_OPTION, name
        proc = gpudiag("probes", name)
        assert proc.returncode == 0 and "busy_memory_mib" in proc.stdout, proc.stdout
    assert not any(o.name == "idle_used_mib" for info in PROBES.values() for o in info.options)
