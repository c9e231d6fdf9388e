"""`gpudiag scan localhost --probes copy_bench --set copy_bench.…`: the whole probe through the CLI, run as
a subprocess into a temporary reports directory, and the stored result read back."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SMALL = ["batch_sizes=[1,4]", "hidden_sizes=[64]", "sweep_min_bytes=1024", "sweep_max_bytes=65536",
         "samples=3", "target_us=20", "max_iters=5", "draft_tokens=4", "device=cpu"]
STRATEGIES = ("loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed")


def scan(tmp_path, *settings):
    # An empty /proc view: an sglang server running elsewhere on this machine must not choose the
    # interpreter (or the workload shapes) this test measures with.
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir(parents=True)
    argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "copy_bench",
            "--reports-dir", str(tmp_path), "--json", "--set", "deployment.proc_root=%s" % empty_proc]
    for item in settings:
        argv += ["--set", "copy_bench." + item]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    run = json.loads(proc.stdout)
    host = json.loads((tmp_path / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text())
    return proc, host["probes"]["copy_bench"]


def test_scan_stores_verified_timings_for_every_workload(tmp_path):
    proc, result = scan(tmp_path, *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert result["status"] == "ok"
    data = result["data"]
    (cpu,) = data["gpus"]
    assert cpu["status"] == "ok" and data["device"] == "cpu"
    assert [r["bytes"] for r in cpu["sweep"]] == [1024, 4096, 16384, 65536]
    assert all(r["copy_us"] > 0 and r["foreach_us"] > 0 for r in cpu["sweep"])
    assert "crossover_bytes" in cpu and cpu["recommended_split_bytes"] is None
    assert "no copy engine" in cpu["split_reason"]          # the CPU has no DMA engine to split off to
    names = [w["name"] for w in cpu["workloads"]]   # measured most informative first: the largest batch per path
    assert sorted(names) == sorted(["eagle_draft/bs1/h64", "eagle_draft/bs4/h64", "eagle_draft_extend/bs1/h64",
                                    "eagle_draft_extend/bs4/h64", "dflash_verify/bs1", "dflash_verify/bs4"])
    assert names[0] == "eagle_draft/bs4/h64"
    for workload in cpu["workloads"]:
        for name in STRATEGIES:
            timing = workload["strategies"][name]
            assert timing["status"] == "ok", (workload["name"], name, timing)
            assert timing["method"] == "perf_counter" and timing["samples"] == 3
            assert timing["p10_us"] <= timing["median_us"] <= timing["p90_us"]
        assert workload["strategies"]["installed"]["status"] == "skipped"
        assert workload["best"] in STRATEGIES
    extend = next(w for w in cpu["workloads"] if w["name"] == "eagle_draft_extend/bs4/h64")
    hidden = [f for f in extend["fields"] if f["name"] == "hidden_states"][0]
    assert hidden["shape"] == [16, 64] and hidden["dtype"] == hidden["src_dtype"] == "bfloat16"
    seq_lens = [f for f in extend["fields"] if f["name"] == "seq_lens"][0]
    assert (seq_lens["dtype"], seq_lens["src_dtype"]) == ("int64", "int64")   # no sglang_source: 0.5.23's
    # sglang's split moves hidden_states off the grouped call by name, even at 4 × 64 bf16 (512 bytes);
    # nothing else leaves it, and the verify path, which copies no hidden state, splits nothing.
    for workload in cpu["workloads"]:
        split = [f["name"] for f in workload["fields"] if f["split"] == "dma"]
        assert split == ([] if workload["path"] == "dflash_verify" else ["hidden_states"]), workload["name"]
        assert {f["size_split"] for f in workload["fields"]} == {"foreach"}   # no threshold on a CPU


def test_isolated_child_run_and_a_bad_option_through_the_cli(tmp_path):
    proc, result = scan(tmp_path / "a", *(SMALL + ["paths=dflash_verify", "isolate=true"]))
    assert proc.returncode == 0, proc.stderr
    data = result["data"]
    assert data["isolated"] is True
    assert sorted(w["name"] for w in data["gpus"][0]["workloads"]) == ["dflash_verify/bs1", "dflash_verify/bs4"]
    assert data["gpus"][0]["workloads"][0]["strategies"]["packed"]["status"] == "ok"
    bad = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "copy_bench",
                          "--reports-dir", str(tmp_path / "b"), "--set", "copy_bench.batch_sizes=[0]"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2           # checked against the declaration before anything runs
    assert bad.stderr == "gpudiag: error: --set copy_bench.batch_sizes: expected a list of integers ≥ 1, " \
                         "e.g. [1,8], got [0]\n"
    assert not (tmp_path / "b").exists()


def test_the_probe_still_refuses_a_bad_option_it_is_sent_directly():
    """A bundle run by Ansible or pdsh gets no control-side check: the probe's own one-line error stays."""
    from probes.copybench import options
    with pytest.raises(options.OptionError, match="copy_bench.batch_sizes: expected an integer ≥ 1, got 0"):
        options.resolve({"batch_sizes": [0]}, "cpu")
