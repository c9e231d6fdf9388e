"""A GPU whose benchmark child is cut short keeps what it measured: the child streams each workload as soon as it is
measured, and on a hang (timeout) or a killed child the parent keeps every workload it got, plus one record naming
the GPU, how many workloads were measured of how many planned and the time the rest would need."""
import time

from probes.boot import local_modules
from probes.copybench import child, devices, records
from tests.probes.test_copy_bench_records import JOB, problem

# Stands in for probes.copybench.devices in the benchmark child: GPU 0 streams `measure_first` workloads built by the
# real constructors, then hangs (`then: hang`) or SIGKILLs itself (`then: die`); every other GPU finishes.
STREAMS_THEN_STOPS = '''
import os, signal, time
from probes.copybench import records, workloads

def workload(bs):
    fields = records.marked_fields(workloads.field_specs("eagle_draft", bs, 4096, 4, 3, 8), None)
    timing = {"status": "ok", "median_us": 40.0 + bs, "graph": {"status": "ok", "median_us": 7.0}}
    return records.workload_record("eagle_draft/bs%d/h4096" % bs, "eagle_draft", bs, 4096, "ok", fields,
                                   strategies={"grouped_foreach": timing}, best="grouped_foreach",
                                   best_graph="grouped_foreach")

def bench_all(job, emit=None, extra_strategies=None):
    out = []
    for i in job["gpus"]:
        done = []
        for bs in job["batch_sizes"][:job["measure_first"] if i == 0 else None]:
            done.append(workload(bs))
            emit(records.workload_frame(i, done[-1]))
        if i == 0 and job["then"] == "hang":
            time.sleep(3600)
        if i == 0 and job["then"] == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        r = records.device_record(i, "ok", name="NVIDIA H200", workloads=done, sweep=[])
        emit(r)
        out.append(r)
    return out
'''
BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64, 128]


def cut_short(monkeypatch, seconds=12.0, **job):
    monkeypatch.setattr(child, "GRACE_S", 0.5)
    modules = local_modules()
    modules["probes.copybench.devices"] = [False, STREAMS_THEN_STOPS]
    return child.run_isolated(dict(JOB, batch_sizes=BATCH_SIZES, **job), modules, time.monotonic() + seconds)


def test_a_child_that_measures_three_workloads_then_hangs_keeps_them_and_a_timeout_record(monkeypatch):
    start = time.monotonic()
    hung, other = cut_short(monkeypatch, measure_first=3, then="hang")
    assert time.monotonic() - start < 12
    assert (hung["index"], hung["name"], hung["status"]) == (0, "NVIDIA H200", "timeout")
    assert [w["name"] for w in hung["workloads"]] == ["eagle_draft/bs1/h4096", "eagle_draft/bs2/h4096",
                                                     "eagle_draft/bs4/h4096"]
    assert hung["workloads"][0]["strategies"]["grouped_foreach"]["median_us"] == 41.0
    # The rest: 5 workloads at the declared 0.5 s and 2 sweep sizes at 0.15 s.
    assert hung["cut_short"] == {"measured": 3, "planned": 8, "needs_s": 2.8}
    assert hung["needs_s"] == 2.8
    assert "no result within" in hung["reason"]
    assert "cut short after 3 of 8 workloads measured; the other 5 workloads and the sweep need about 3 s" \
        in hung["reason"]
    assert other["status"] == "ok" and len(other["workloads"]) == 8     # the next GPU ran in a fresh child
    assert problem([hung, other]) is None


def test_a_child_killed_after_two_workloads_keeps_both(monkeypatch):
    died, other = cut_short(monkeypatch, measure_first=2, then="die")
    assert (died["index"], died["status"]) == (0, "error")
    assert "benchmark process failed: killed by SIGKILL" in died["reason"]
    assert [w["batch_size"] for w in died["workloads"]] == [1, 2]
    assert died["cut_short"] == {"measured": 2, "planned": 8, "needs_s": 3.3}
    assert other["status"] == "ok"
    assert problem([died]) is None


def test_a_device_cut_short_before_any_workload_has_no_workloads_key(monkeypatch):
    hung, _ = cut_short(monkeypatch, measure_first=0, then="hang")
    assert hung["status"] == "timeout" and "workloads" not in hung and "cut_short" not in hung
    assert hung["needs_s"] == 4.3


def test_the_real_bench_streams_every_workload_before_its_device_record():
    import pytest
    torch = pytest.importorskip("torch")
    assert torch is not None
    job = {"device": "cpu", "paths": ["dflash_verify"], "batch_sizes": [1, 2], "hidden_sizes": [64], "topk": 2,
           "steps": 2, "draft_tokens": 4, "hidden_dtype": "float32", "samples": 3, "target_us": 20.0,
           "max_iters": 3, "max_mem_mib": 64, "unit_s": JOB["unit_s"], "strategies": ["loop"], "graph": False,
           "h2d": False, "sweep": {"min_bytes": 1024, "max_bytes": 1024, "factor": 4, "dtype": "float32"},
           "budget_s": 30.0}
    sent = []
    [device] = devices.bench_all(job, emit=sent.append)
    streamed = [f[records.WORKLOAD_FRAME] for f in sent[:-1]]
    assert [f["index"] for f in sent[:-1]] == [None, None] and sent[-1] is device
    assert streamed == device["workloads"]       # the same records, in the order the device measured them
