"""copy_bench's two clocks without a GPU: the CUDA paths (CUDA-event timing, a captured graph replayed) driven with
a fake torch.cuda over CPU tensors. Every strategy and every sweep size is timed eagerly and inside a replayed graph,
the sweep's crossover is read in GPU-stream time, and the workloads the step cost reads run first."""
import glob
import json
import os
import time

import torch

from probes import copy_bench
from probes.copybench import analysis, bench
from probes.copybench.bench import DeviceBench, run_device
from probes.copybench.budget import Budget

RECORDED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "recorded", "h200-2026-12-04")


class FakeEvent(object):
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.at - self.at) * 1000.0   # milliseconds, as CUDA events give them


class FakeCuda(object):
    Event = FakeEvent

    def __init__(self):
        self.synced = 0

    def synchronize(self, index=None):
        self.synced += 1


class TorchOnFakeCuda(object):
    """Real torch for the tensors (on the CPU), a fake torch.cuda for the timing and synchronisation."""

    def __init__(self):
        self.cuda = FakeCuda()

    def __getattr__(self, name):
        return getattr(torch, name)


class FakeGraph(object):
    """A 'captured graph': replay runs the captured function `copies` times."""
    captured = []

    def __init__(self, fn, copies):
        self.fn, self.copies = fn, copies
        FakeGraph.captured.append(self)

    def replay(self):
        for _ in range(self.copies):
            self.fn()


JOB = {"device": "cuda", "paths": ["eagle_draft", "dflash_verify"], "batch_sizes": [1, 4], "hidden_sizes": [64],
       "topk": 2, "steps": 2, "draft_tokens": 4, "hidden_dtype": "float32", "samples": 3, "target_us": 20.0,
       "max_iters": 4, "max_mem_mib": 64, "unit_s": copy_bench.PROBE["unit_s"], "graph": True, "graph_copies": 2, "h2d": False, "split_bytes": None,
       "strategies": ["loop", "grouped_foreach", "grouped_foreach_dma_split"], "behaviour": {}, "field_names": {},
       "sweep": {"min_bytes": 1024, "max_bytes": 16384, "factor": 4, "dtype": "float32"}}


def cuda_bench(monkeypatch, job=None, seconds=60.0):
    monkeypatch.setattr(bench, "capture_graph", lambda torch_, fn, copies: FakeGraph(fn, copies))
    fake = TorchOnFakeCuda()
    device = DeviceBench(fake, "cpu", dict(job or JOB), Budget(seconds))
    device.cuda = True                       # the CUDA paths, on CPU tensors
    device.timer = bench.CudaEventTimer(fake)
    return device


def test_every_strategy_and_sweep_size_is_timed_in_both_clocks(monkeypatch):
    device = cuda_bench(monkeypatch)
    result = run_device(device)
    assert result["crossover_clock"] == "graph"
    for row in result["sweep"]:
        for kind in ("copy", "foreach"):
            assert row[kind]["method"] == "cuda_events" and row[kind]["graph"]["method"] == "cuda_graph_replay"
            assert row[kind + "_us"] == row[kind]["median_us"]
            assert row[kind + "_graph_us"] == row[kind]["graph"]["median_us"] is not None
    for w in result["workloads"]:
        assert w["status"] == "ok" and w["best"] in JOB["strategies"] and w["best_graph"] in JOB["strategies"]
        for name in JOB["strategies"]:
            assert w["strategies"][name]["graph"]["status"] == "ok"
    # The workloads the cost per decode step reads come first: per path the largest batch size.
    assert [w["name"] for w in result["workloads"]][:2] == ["eagle_draft/bs4/h64", "dflash_verify/bs4"]
    assert FakeGraph.captured and device.torch.cuda.synced > 0


def test_the_split_follows_gpu_stream_time_where_the_sweep_replayed_graphs():
    """The recorded H200 sweep (eager only): every size below 16 MiB sits at the ~10 µs launch floor, so copy_()
    clearly wins only from 32 MiB. Inside a replayed graph the launch floor is gone: the split comes from there."""
    [path] = glob.glob(os.path.join(RECORDED, "deep-timeout-280", "runs", "*", "hosts", "localhost.json"))
    with open(path, encoding="utf-8") as fh:
        sweep = json.load(fh)["probes"]["copy_bench"]["data"]["gpus"][0]["sweep"]
    assert analysis.sweep_clock(sweep) == "eager"
    assert analysis.crossover_bytes(sweep, "eager") == 32 << 20
    # The same sizes replayed in a graph, no launch floor: the foreach kernel starts sooner, copy_() (a DMA memcpy)
    # moves bytes faster; it is clearly ahead from 2 MiB (at 1 MiB the two are even).
    replayed = [dict(r, copy_graph_us=2.0 + r["bytes"] / 4.0e6, foreach_graph_us=1.2 + r["bytes"] / 1.0e6)
                for r in sweep]
    assert analysis.sweep_clock(replayed) == "graph"
    assert analysis.crossover_bytes(replayed, "graph") == 2 << 20
    assert analysis.crossover_bytes(replayed, "eager") == 32 << 20      # the eager figures are unchanged
    split, why = analysis.recommended_split(2 << 20, cuda=True, clock="graph")
    assert split == 2 << 20 and "GPU stream time" in why


def test_a_short_deadline_measures_the_step_cost_workloads_and_lists_the_rest_with_their_need(monkeypatch):
    real = bench.DeviceBench._measure

    def slow(self, *args):   # a workload as slow as on a busy host: longer than the whole deadline
        time.sleep(0.06)
        return real(self, *args)
    monkeypatch.setattr(bench.DeviceBench, "_measure", slow)
    device = cuda_bench(monkeypatch, seconds=0.05)
    result = run_device(device)
    first = result["workloads"][0]
    assert first["status"] == "ok" and first["name"] == "eagle_draft/bs4/h64"     # never none when one fits
    rest = [w for w in result["workloads"][1:] if w["status"] == "skipped"]
    assert len(rest) == 3 and all(w["reason"] == "time budget spent" and w["needs_s"] >= 0.06 for w in rest)
    assert all(r["status"] == "skipped" and r["needs_s"] > 0 for r in result["sweep"])
    assert result["time_needed_s"] > 0 and "eagle_draft/bs4/h64" not in result["lost_to_budget"]
