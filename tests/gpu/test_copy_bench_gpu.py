"""copy_bench on CUDA: every strategy verified eagerly and inside a captured graph, the DMA copy beating
the foreach kernel on a large tensor, host→device figures, and a busy GPU refused. Prints the measured
tables (run with `pytest -m gpu tests/gpu -s`)."""
import subprocess
import sys
import time

import pytest

from probes import copy_bench
from probes.context import ProbeContext, Skip

pytestmark = pytest.mark.gpu

MIB = 1024 * 1024
SETTINGS = {"device": "cuda", "batch_sizes": [1, 32, 128], "hidden_sizes": [7168], "sweep_min_bytes": 1024,
            "sweep_max_bytes": 64 * MIB, "sweep_factor": 4}
CORE = ("loop", "grouped_foreach", "grouped_foreach_dma_split", "packed")


def collect(settings, seconds=420):
    ctx = ProbeContext(options={"copy_bench": settings, "force": False},
                       deadline=time.monotonic() + seconds)
    return copy_bench.collect(ctx)


def us(value):
    return "-" if value is None else "%.1f" % value


def print_tables(data):
    for gpu in data["gpus"]:
        print("\n== GPU %s %s: %s (%s)" % (gpu.get("index"), gpu.get("name"), gpu["status"],
                                          gpu.get("reason") or gpu.get("idle_check", {}).get("reason")))
        if gpu["status"] != "ok":
            continue
        print("%12s %10s %12s %8s" % ("bytes", "copy_ us", "foreach us", "ratio"))
        for row in gpu["sweep"]:
            ratio = row["foreach_us"] / row["copy_us"] if row.get("copy_us") and row.get("foreach_us") else None
            print("%12d %10s %12s %8s" % (row["bytes"], us(row.get("copy_us")), us(row.get("foreach_us")),
                                          "-" if ratio is None else "%.2f" % ratio))
        print("crossover %s, recommended split %s" % (gpu["crossover_bytes"], gpu["recommended_split_bytes"]))
        for w in gpu["workloads"]:
            print("-- %s (%d bytes) best=%s saving_vs_installed=%s" % (w["name"], w["total_bytes"], w.get("best"),
                                                                      w.get("saving_vs_installed_us")))
            for name, t in sorted((w.get("strategies") or {}).items()):
                graph = t.get("graph") or {}
                print("   %-26s %-7s eager %8s us (p10 %s p90 %s cv %s) x%s   graph %8s us x%s" % (
                    name, t["status"], us(t.get("median_us")), us(t.get("p10_us")), us(t.get("p90_us")),
                    t.get("cv"), t.get("speedup_vs_loop"), us(graph.get("median_us")),
                    graph.get("speedup_vs_loop")))
                for gate, timed in sorted((t.get("env") or {}).items()):
                    print("   %-26s %s on %s us, off %s us" % ("", gate, us(timed["on"].get("median_us")),
                                                              us(timed["off"].get("median_us"))))
        print("h2d:", {k: v for k, v in (gpu.get("h2d") or {}).items() if k.endswith("_us")})
        print("memory:", gpu.get("memory"))
    print("outliers:", data["outliers"])


@pytest.fixture(scope="module")
def measured():
    data = collect(SETTINGS)
    print_tables(data)
    return data


def test_every_strategy_is_verified_eager_and_in_a_graph(measured):
    assert measured["device"] == "cuda" and measured["isolated"] is True
    ok = [g for g in measured["gpus"] if g["status"] == "ok"]
    assert ok, [(g.get("index"), g.get("reason")) for g in measured["gpus"]]
    for gpu in ok:
        assert gpu["memory"]["left_allocated_mib"] <= 1.0
        for w in gpu["workloads"]:
            assert w["status"] == "ok", w
            for name in CORE:
                entry = w["strategies"][name]
                assert entry["status"] == "ok", (w["name"], name, entry)
                assert entry["method"] == "cuda_events" and entry["samples"] >= 10
                assert entry["graph"]["status"] == "ok", (w["name"], name, entry["graph"])
                assert entry["graph"]["method"] == "cuda_graph_replay"
            installed = w["strategies"]["installed"]
            assert installed["status"] in ("ok", "skipped")
            for gate, timed in (installed.get("env") or {}).items():   # an env-gated fast path, both ways
                assert timed["on"]["status"] == timed["off"]["status"] == "ok", (w["name"], gate, timed)
            assert all(f["src_dtype"] for f in w["fields"])


def test_dma_copy_beats_the_foreach_kernel_on_64_mib(measured):
    for gpu in (g for g in measured["gpus"] if g["status"] == "ok"):
        (row,) = [r for r in gpu["sweep"] if r["bytes"] == 64 * MIB]
        assert row["copy_us"] < row["foreach_us"], row
        assert gpu["crossover_bytes"] is not None and gpu["crossover_bytes"] <= 64 * MIB
        assert gpu["h2d"]["pinned_us"] > 0 and gpu["h2d"]["pageable_us"] > 0


def test_the_sweep_and_every_workload_are_timed_in_both_clocks_and_the_split_read_in_gpu_time(measured):
    for gpu in (g for g in measured["gpus"] if g["status"] == "ok"):
        assert gpu["crossover_clock"] == "graph" and "GPU stream time" in gpu["split_reason"]
        for row in gpu["sweep"]:
            assert row["copy_graph_us"] > 0 and row["foreach_graph_us"] > 0, row
        assert all(w["best_graph"] for w in gpu["workloads"])


def test_a_short_deadline_measures_the_step_cost_workloads_first_and_lists_the_rest():
    data = collect(dict(SETTINGS, gpus=[0]), seconds=25)
    (gpu,) = data["gpus"]
    assert gpu["status"] == "ok", gpu
    first = gpu["workloads"][0]
    assert first["status"] == "ok" and first["batch_size"] == 128, first   # what the step cost reads
    later = [w for w in gpu["workloads"] + gpu["sweep"] if w.get("status") == "skipped"]
    assert all(w["needs_s"] > 0 for w in later) and gpu["time_needed_s"] == round(sum(w["needs_s"] for w in later), 1)


def test_a_gpu_with_another_process_is_refused():
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, torch\nx = torch.empty(3 << 30, dtype=torch.uint8, device='cuda:0')\n"
                               "torch.cuda.synchronize()\nprint('ready', flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(Skip) as refused:
            collect(dict(SETTINGS, gpus=[0], batch_sizes=[1], sweep_max_bytes=MIB), seconds=120)
        print("\nrefused:", refused.value)
        assert "busy: 1 compute process(es)" in str(refused.value) and "pass --force" in str(refused.value)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
