"""Every record copy_bench emits fits its declaration on every path: a device measured, refused, timed out, failed,
died, left without time or without a result; a workload measured or not reached; a sweep row timed or not. Driven
with fakes (a fake torch.cuda, stand-in benchmark children) and checked against the declared SHAPE. Then the
recorded H200 run whose GPU 0 timed out (sglang 0.5.23 importable, 12 s given) rebuilt with fakes through
`collect()`: the probe keeps the other GPU's records and names the one that timed out."""
import copy
import glob
import json
import os
import sys
import time
import types

import pytest

from gpudiag.probe_data import probe_problem
from probes import copy_bench
from probes.boot import local_modules
from probes.context import ProbeContext
from probes.copybench import child, devices, records
from probes.copybench.bench import DeviceBench
from probes.copybench.budget import Budget
from tests.probes import test_copy_bench_rotation as rotation
from tests.probes.test_copy_bench_probe import FakeCuda as BusyCuda

RECORDED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "recorded", "h200-2026-12-04")


def recorded_host(run):
    [path] = glob.glob(os.path.join(RECORDED, run, "runs", "*", "hosts", "localhost.json"))
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


BASE = recorded_host("deep-timeout-280")["probes"]["copy_bench"]["data"]


def problem(device_records):
    """The first misfit of a copy_bench document holding these device records (the recorded run's other keys)."""
    return probe_problem("copy_bench", {"status": "ok", "data": dict(BASE, gpus=device_records)})


# Stands in for probes.copybench.devices in the benchmark child: GPU `hang_on` hangs, `die_on` kills the child,
# `silent` ends it without a word; every other GPU sends a record built by the real constructors.
CHILD = '''
import os, time
from probes.copybench import records, workloads

def bench_all(job, emit=None, extra_strategies=None):
    out = []
    if job.get("silent"):
        return out
    for i in job["gpus"]:
        if i == job.get("hang_on"):
            time.sleep(3600)
        if i == job.get("die_on"):
            os._exit(1)
        fields = records.marked_fields(workloads.field_specs("eagle_draft", 8, 4096, 4, 3, 8), None)
        timing = {"status": "ok", "median_us": 40.0, "graph": {"status": "ok", "median_us": 7.0}}
        w = records.workload_record("eagle_draft/bs8/h4096", "eagle_draft", 8, 4096, "ok", fields,
                                    strategies={"grouped_foreach": timing}, best="grouped_foreach",
                                    best_graph="grouped_foreach")
        row = records.sweep_row(1024, timing, timing)
        r = records.device_record(i, "ok", name="NVIDIA H200", workloads=[w], sweep=[row])
        emit(r)
        out.append(r)
    return out
'''
JOB = {"device": "cuda", "gpus": [0, 1], "gpu_names": {"0": "NVIDIA H200", "1": "NVIDIA H200"},
       "paths": ["eagle_draft"], "batch_sizes": [8], "hidden_sizes": [4096], "max_mem_mib": 2048, "unit_s": copy_bench.PROBE["unit_s"],
       "sweep": {"min_bytes": 1024, "max_bytes": 4096, "factor": 4, "dtype": "bfloat16"}}


def isolated(monkeypatch, seconds=30.0, **job):
    monkeypatch.setattr(child, "GRACE_S", 0.5)
    modules = local_modules()
    modules["probes.copybench.devices"] = [False, CHILD]
    return child.run_isolated(dict(JOB, **job), modules, time.monotonic() + seconds)


def measured(monkeypatch):
    return rotation.drive(monkeypatch, seconds=rotation.GPUS * 10.0)[0]


def budget(monkeypatch):
    return rotation.drive(monkeypatch, seconds=0.3)[0]


def refused(monkeypatch):
    from probes.copybench.devices import bench_one
    busy = [{"index": 0, "uuid": "GPU-6513270e-269e-4d37-b2a7-4de452e6b438", "memory_used_mib": 61000,
             "processes": [{"pid": 3141, "name": "python3", "used_memory_mib": 61000}]}]
    job = {"busy_memory_mib": 1024, "max_mem_mib": 2048, "unit_s": copy_bench.PROBE["unit_s"], "force": False,
           "gpu_policy": copy_bench.gpu_policy({"devices": busy, "source": "env"}, [], False, 1024, 1)}
    return [bench_one(types.SimpleNamespace(cuda=BusyCuda()), job, 0, None, None, None)]


def raised(monkeypatch):
    class Broken(object):
        def get_device_properties(self, index):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=Broken()))
    return devices.bench_all(dict(JOB, budget_s=10.0, strategies=["loop"]))


PATHS = {
    "measured": (measured, {"ok"}),
    "time budget": (budget, {"ok"}),
    "refused by the GPU layer": (refused, {"skipped"}),
    "error raised": (raised, {"error"}),
    "timeout": (lambda mp: isolated(mp, seconds=12.0, hang_on=0), {"timeout", "ok"}),
    "child died": (lambda mp: isolated(mp, die_on=0), {"error", "ok"}),
    "no time to start": (lambda mp: isolated(mp, seconds=1.0), {"skipped"}),
    "no result": (lambda mp: isolated(mp, silent=True), {"error"}),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_device_record_fits_the_declaration(monkeypatch, path):
    make, statuses = PATHS[path]
    found = make(monkeypatch)
    assert {r["status"] for r in found} == statuses
    for record in found:
        assert problem([record]) is None, (path, record)
        assert "name" in record and "index" in record
        if record["status"] != "ok":
            assert record["reason"]
    if path in ("timeout", "child died", "no time to start", "no result", "error raised"):
        unmeasured = [r for r in found if r["status"] != "ok"]
        assert all(r["name"] == "NVIDIA H200" and r["needs_s"] > 0 for r in unmeasured)   # named, with its need


def test_workload_and_sweep_records_fit_on_every_path():
    import torch
    job = {"device": "cpu", "paths": ["eagle_draft"], "batch_sizes": [2], "hidden_sizes": [64], "topk": 2,
           "steps": 2, "draft_tokens": 4, "hidden_dtype": "float32", "samples": 3, "target_us": 20.0,
           "max_iters": 3, "max_mem_mib": 64, "unit_s": copy_bench.PROBE["unit_s"], "strategies": ["loop", "grouped_foreach"], "graph": True,
           "sweep": {"min_bytes": 1024, "max_bytes": 4096, "factor": 4, "dtype": "float32"}}
    timed = DeviceBench(torch, "cpu", job, Budget(30.0))
    ok_rows, ok_workload = timed.sweep(), timed.workload("eagle_draft", 2, 64, None)
    spent = DeviceBench(torch, "cpu", job, Budget(0.0))
    late_rows, late_workload = spent.sweep(), spent.workload("eagle_draft", 2, 64, None)
    too_big = DeviceBench(torch, "cpu", dict(job, max_mem_mib=0), Budget(30.0)).workload("eagle_draft", 2, 64, None)
    assert [r.get("status") for r in ok_rows] == [None, None] and ok_workload["status"] == "ok"
    assert {r["status"] for r in late_rows} == {"skipped"} and all(r["needs_s"] == 0.05 for r in late_rows)
    assert late_workload["status"] == "skipped" and late_workload["needs_s"] == 0.3
    assert "over max_mem_mib" in too_big["reason"]
    for rows, workload in ((ok_rows, ok_workload), (late_rows, late_workload), ([], too_big)):
        record = records.device_record(None, "ok", name="cpu", sweep=rows, workloads=[workload])
        assert problem([record]) is None


def test_the_recorded_gpu_timeout_keeps_the_other_gpus_records_and_names_the_timed_out_one(monkeypatch):
    """The recorded run: sglang 0.5.23 importable, copy_bench given 12 s, GPU 0 "timeout", then the whole probe
    lost to `gpus[0].name: missing`. Rebuilt on two GPUs with the recorded env and sglang_source data."""
    host = recorded_host("copy-bench-sglang-0.5.23-timeout-90")
    results = {name: copy.deepcopy(host["probes"][name]["data"]) for name in ("deployment", "env", "sglang_source")}
    results["deployment"]["interpreter"]["path"] = sys.executable   # the recorded venv is not on this machine
    results["env"]["torch"]["interpreter"]["path"] = results["env"]["torch"]["executable"] = sys.executable
    gpus = results["env"]["gpus"]
    second = dict(gpus["devices"][0], index=1, uuid="GPU-ec939dff-7b3a-00a2-2d1d-0e472fdd8d2f")
    gpus.update(devices=[gpus["devices"][0], second], count=2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(child, "GRACE_S", 0.5)
    asked = []
    monkeypatch.setattr(copy_bench.interpreter, "torch_child", lambda *a, **k: asked.append(a))
    modules = local_modules()
    modules["probes.copybench.devices"] = [False, CHILD.replace('job.get("hang_on")', "0")]
    options = {"copy_bench": {"device": "cuda", "batch_sizes": "1,32", "hidden_sizes": "4096"}}
    ctx = ProbeContext(options=options, results=results, deadline=time.monotonic() + 12.0, modules=modules)
    data = copy_bench.collect(ctx)
    assert asked == []                                    # env already said torch 2.11 sees 2 GPUs: no extra child
    assert data["torch_info_from"] == "env" and data["torch_version"] == "2.11.0+cu130"
    assert probe_problem("copy_bench", {"status": "ok", "data": data}) is None
    timed_out, kept = data["gpus"]
    assert (timed_out["index"], timed_out["name"], timed_out["status"]) == (0, "NVIDIA H200", "timeout")
    assert "no result within" in timed_out["reason"] and timed_out["needs_s"] > 0
    assert kept["index"] == 1 and kept["status"] == "ok" and kept["workloads"][0]["status"] == "ok"
    assert data["installed"]["release"] == "0.5.23"
    # Read back, Q5 states GPU 1's costs and why GPU 0 has none.
    from gpudiag.findings.answers_measured import q5_copy_cost
    from gpudiag.models import HostResult, ProbeResult
    probes = {name: ProbeResult(status="ok", data=results[name]) for name in results}
    probes["copy_bench"] = ProbeResult(status="ok", data=data)
    answer = q5_copy_cost(HostResult(name="localhost", status="ok", probes=probes))
    assert answer.status == "partial"
    assert "GPU 1: copy cost per replay, CPU issue / GPU stream (eagle_draft bs 8 h4096: best grouped_foreach " \
           "40.0 µs CPU issue / grouped_foreach 7.0 µs GPU stream" in answer.text
    assert "GPU 0: not checked — no result within" in answer.text


def test_torch_and_its_gpu_count_come_from_env_or_torch_caps_of_the_same_interpreter(monkeypatch):
    host = recorded_host("deep-timeout-280")
    results = {name: host["probes"][name]["data"] for name in ("env", "torch_caps")}
    python = "/opt/torch/.venv/bin/python3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    info = copy_bench.prior_torch_info(results, python)
    assert info == {"torch_version": "2.11.0+cu130", "has_foreach_copy": True, "cuda_available": True,
                    "device_count": 1, "executable": python, "from": "torch_caps"}
    assert copy_bench.prior_torch_info(results, "/usr/bin/python3") is None      # another interpreter's torch
    env_only = {"env": results["env"]}
    assert copy_bench.prior_torch_info(env_only, python)["from"] == "env"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")                              # narrows what torch sees
    assert copy_bench.prior_torch_info(env_only, python) is None
    assert copy_bench.gpu_names(results) == {"0": "NVIDIA H200"}
