"""The host's runner and the GPU probes together, at a tenth of real time: light probes that take ~11 s, a copy
probe whose workload takes ~0.5 s and the real cuda_graph probe whose synthetic cell takes ~1.2 s (a fake
worker child, no torch, no GPU). Inside the runner budget of `--timeout 130` every workload and cell is
measured; inside that of `--timeout 40` fewer are, and the rest are listed with the time they would need."""
import sys
import time
import types

import pytest

from gpudiag.orchestrator import runner_budget
from gpudiag.probe_data import probe_problem
from probes import cuda_graph, runner
from probes.context import ProbeContext

SCALE = 0.1   # every duration of the simulation, reserves and unit costs included, at a tenth
LIGHT_S = 11.0   # env, torch_caps and the others on the recorded H200 run
WORKLOAD_S = 0.5
CELL_S = 1.0   # measured; cuda_graph declares 1.2 s with its margin
WORKLOADS = 20
UUID = "GPU-ec939dff-7b3a-00a2-2d1d-0e472fdd8d2e"

COPIES = {"probes.fake_copies": [False, "PROBE = {'set': 'deep', 'order': 1, 'timeout_s': 900, "
                                        "'unit_s': {'workload on one GPU': 0.5}}"]}


def _module(monkeypatch, name, collect):
    module = types.ModuleType("probes." + name)
    module.collect = collect
    monkeypatch.setitem(sys.modules, "probes." + name, module)


def fake_env(ctx):
    time.sleep(LIGHT_S * SCALE)
    return {"gpus": {"status": "ok", "source": "nvidia-smi", "driver_version": "580.159.04",
                     "devices": [{"index": 0, "uuid": UUID, "name": "NVIDIA H200", "memory_used_mib": 0,
                                  "memory_total_mib": 143771, "processes": []}]}}


def fake_copies(ctx):
    """One workload at a time while one fits in the time left (a tenth of a second kept back)."""
    measured, left = [], []
    for number in range(WORKLOADS):
        if ctx.time_left() < (WORKLOAD_S + 1.0) * SCALE:
            left.append({"workload": number, "need_s": WORKLOAD_S})
            continue
        time.sleep(WORKLOAD_S * SCALE)
        measured.append(number)
    return {"measured": measured, "unmeasured": left}


class FakeWorker(object):
    def __init__(self, modules=None, env=None, python=None):
        pass

    def call(self, handler, args, timeout):
        if handler.endswith(":device_info"):
            return {"status": "ok", "torch": "2.11.0+cu130", "cuda": "13.0", "cuda_available": True,
                    "devices": [{"index": 0, "name": "NVIDIA H200", "uuid": UUID, "compute_capability": "sm_90"}]}
        if timeout < CELL_S * SCALE:
            time.sleep(timeout)
            return {"status": "timeout", "detail": "no answer within %.1f s; child killed" % timeout}
        time.sleep(CELL_S * SCALE)
        return {"status": "ok", "max_abs_diff": 0.0, "capture_s": 0.01, "memory_cap_mib": 4096, "estimated_mib": 68}

    def close(self):
        pass

    def remove_logs(self):
        pass


@pytest.fixture
def host(monkeypatch):
    _module(monkeypatch, "env", fake_env)
    # no live server: nothing of this machine's own processes takes part
    _module(monkeypatch, "deployment", lambda ctx: {"servers": [], "interpreter": {"path": sys.executable,
                                                                                    "why": "default"}})
    _module(monkeypatch, "sglang_source", lambda ctx: {"found": False})
    _module(monkeypatch, "fake_copies", fake_copies)
    monkeypatch.setattr(cuda_graph, "Worker", FakeWorker)
    monkeypatch.setattr(cuda_graph, "SYNTHETIC_RESERVE_SECONDS", cuda_graph.SYNTHETIC_RESERVE_SECONDS * SCALE)
    monkeypatch.setattr(cuda_graph, "SYNTHETIC_CELL_S", cuda_graph.SYNTHETIC_CELL_S * SCALE)

    def time_left(self, cap=None):   # the context's own rule, its one-second floor scaled too
        left = max(1.0 * SCALE, self.deadline - time.monotonic())
        return min(left, cap) if cap is not None else left
    monkeypatch.setattr(ProbeContext, "time_left", time_left)

    def scan(timeout):
        return runner.run_all({"probes": ["deployment", "env", "sglang_source", "fake_copies", "cuda_graph"],
                               "options": {"cuda_graph": {"mode": "synthetic"}},
                               "budget_s": runner_budget(timeout) * SCALE, "modules": COPIES})["probes"]
    return scan


def test_at_130_s_every_workload_and_cell_is_measured(host):
    probes = host(130)
    assert all(p["status"] == "ok" for p in probes.values()), probes
    assert len(probes["fake_copies"]["data"]["measured"]) == WORKLOADS
    cells = probes["cuda_graph"]["data"]["cells"]
    assert len(cells) == 12 and all(c["status"] == "ok" for c in cells)
    assert "unmeasured" not in probes["cuda_graph"]["data"]
    assert probe_problem("cuda_graph", probes["cuda_graph"]) is None
    # cuda_graph got what fake_copies left: more than its share of the time both started with.
    copies = probes["fake_copies"]
    both = copies["limit_s"] * (900 + 1200) / 900
    assert probes["cuda_graph"]["limit_s"] > both * 1200 / 2100


def test_at_40_s_fewer_are_measured_and_the_rest_listed_with_their_need(host):
    probes = host(40)
    assert all(p["status"] == "ok" for p in probes.values()), probes
    copies = probes["fake_copies"]["data"]
    assert 0 < len(copies["measured"]) < WORKLOADS and copies["unmeasured"]
    data = probes["cuda_graph"]["data"]
    measured = [c for c in data["cells"] if c["status"] == "ok"]
    left = [c for c in data["cells"] if c["status"] == "skipped"]
    assert 0 < len(measured) < 12 and len(measured) + len(left) == 12
    assert {c["path"] for c in measured} == {"eagle_draft", "eagle_draft_extend", "dflash_verify"}
    for path in ("eagle_draft", "eagle_draft_extend", "dflash_verify"):   # the largest batch sizes went first
        assert min(c["batch_size"] for c in measured if c["path"] == path) > max(
            [c["batch_size"] for c in left if c["path"] == path] or [0])
    assert data["unmeasured"]["cells"] == len(left)
    assert data["unmeasured"]["need_s"] == pytest.approx(len(left) * round(cuda_graph.SYNTHETIC_CELL_S, 1))
    assert probe_problem("cuda_graph", probes["cuda_graph"]) is None
