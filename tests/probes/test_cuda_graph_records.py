"""Every cell the cuda_graph probe emits, on every path (measured, skipped, timed out, refused, out of time, no
answer), fits the probe's declared shape; and the synthetic sweep measures the cells that fit in its time,
the most informative first, listing the rest with the seconds they would need. Driven with a fake worker and a
fake clock: no torch, no GPU."""
import pytest

from probes import cuda_graph
from probes.graphrepro import cells, configs, results, sglang_repro
from probes.schemas import check

CELL = cuda_graph.SHAPE.fields["cells"].item


class Clock(object):
    def __init__(self):
        self.now = 0.0


class ClockContext(object):
    """A probe context on a fake clock: each measured cell moves it on by what a cell costs."""

    def __init__(self, clock, seconds, results=None, options=None):
        self.clock, self.deadline, self.results, self.modules = clock, seconds, results or {}, {}
        self.options = options or {}

    def option(self, name, default=None):
        return self.options.get(name, default)

    def time_left(self, cap=None):
        left = max(1.0, self.deadline - self.clock.now)
        return min(left, cap) if cap is not None else left


def fake_worker(clock, answer, cell_s=1.2):
    class FakeWorker(object):
        calls = []

        def __init__(self, modules=None, env=None, python=None):
            pass

        def call(self, handler, args, timeout):
            FakeWorker.calls.append((args["path"], args["batch_size"], args["draft_tokens"], timeout))
            clock.now += min(cell_s, timeout)
            return answer(args, timeout)

        def close(self):
            pass

        def remove_logs(self):
            pass

        def log_tail(self, offset=0, limit=6000):
            return ""
    return FakeWorker


def synthetic_cells(monkeypatch, answer, seconds=100.0, options=None):
    clock = Clock()
    worker = fake_worker(clock, answer)
    monkeypatch.setattr(cuda_graph, "Worker", worker)
    settings = cuda_graph.settings_from(options or {})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_synthetic(ClockContext(clock, seconds), settings, data, {}, "", "python3")
    return data, worker.calls


def ok(args, timeout):
    return {"status": "ok", "max_abs_diff": 0.0, "capture_s": 0.4, "memory_cap_mib": 4096, "estimated_mib": 9}


def _sglang_cells(monkeypatch, behaviour):
    """Cells of one sglang launch whose launch step behaves as `behaviour` says."""
    clock = Clock()
    ctx = ClockContext(clock, 1000.0 if behaviour != "budget" else 5.0,
                       {"sglang_source": {"speculative_algorithms": ["EAGLE"], "version": "0.5.9"}})

    def run_launch(settings, algorithm, sizes, draft_tokens, *rest):
        if behaviour == "config_error":
            raise configs.ConfigError("no config.json in /models/x")
        return [cells.cell("sglang", algorithm, b, draft_tokens, "ok", "", "sglang", acceptance_length=2.0)
                for b in sizes]
    monkeypatch.setattr(sglang_repro, "run_launch", run_launch)
    settings = cuda_graph.settings_from({"algorithms": ["EAGLE", "DFLASH"], "batch_sizes": [1, 8],
                                         "draft_tokens": [2, 4]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, {}, "", "python3")
    return data["cells"]


def _worker_says(result):
    def answer(args, timeout):
        return result
    return answer


SYNTHETIC_PATHS = {
    "ok": _worker_says({"status": "ok", "max_abs_diff": 0.0, "capture_s": 0.3}),
    "skipped by the child": _worker_says({"status": "skipped", "detail": "estimated 9000 MiB over the cap"}),
    "timeout": _worker_says({"status": "timeout", "detail": "no answer within 120 s; child killed"}),
    "died": _worker_says({"status": "died", "detail": "child killed by SIGSEGV", "signal": "SIGSEGV"}),
    "capture failed": _worker_says({"status": "capture_failed", "detail": "operation not permitted when "
                                    "stream is capturing", "traceback": ["RuntimeError: capture"]}),
    "no result": _worker_says({}),
    "not a dict": _worker_says(None),
    "odd figures": _worker_says({"status": "ok", "max_abs_diff": "nan?", "capture_s": True}),
}


@pytest.mark.parametrize("path", sorted(SYNTHETIC_PATHS))
def test_every_synthetic_cell_fits_the_declared_shape(monkeypatch, path):
    data, _ = synthetic_cells(monkeypatch, SYNTHETIC_PATHS[path], options={"batch_sizes": [1, 8],
                                                                            "cell_timeout": 120.0})
    assert data["cells"]
    for number, cell in enumerate(data["cells"]):
        assert check(CELL, cell, "cells[%d]" % number) is None, (path, cell)


def test_a_cell_cut_short_by_the_time_left_is_a_budget_cell_not_a_hang(monkeypatch):
    data, calls = synthetic_cells(monkeypatch, _worker_says({"status": "timeout", "detail": "no answer"}),
                                  seconds=8.0, options={"batch_sizes": [1], "algorithms": ["DFLASH"]})
    first = data["cells"][0]
    assert calls[0][3] < 120.0
    assert first["status"] == "skipped" and first["detail"].startswith("time budget spent during this cell")
    assert first["need_s"] == cuda_graph.SYNTHETIC_CELL_S and check(CELL, first, "cell") is None


@pytest.mark.parametrize("behaviour", ["launched", "config_error", "budget"])
def test_every_sglang_cell_fits_the_declared_shape(monkeypatch, behaviour):
    found = _sglang_cells(monkeypatch, behaviour)
    assert found and {c["algorithm"] for c in found} == {"EAGLE", "DFLASH"}
    for number, cell in enumerate(found):
        assert check(CELL, cell, "cells[%d]" % number) is None, (behaviour, cell)
    if behaviour == "budget":
        eagle = [c for c in found if c["algorithm"] == "EAGLE"]
        assert all(c["detail"] == "time budget spent before this launch" and c["need_s"] > 0 for c in eagle)


def test_cells_skipped_without_cuda_fit_the_declared_shape():
    settings = cuda_graph.settings_from({})
    for mode in ("synthetic", "sglang"):
        found = results.skipped_cells(settings, mode, "no CUDA device visible to torch")
        assert found and all(check(CELL, c, "cell") is None for c in found)


def test_with_29_seconds_the_cells_that_fit_are_measured_most_informative_first(monkeypatch):
    """The recorded H200 run gave cuda_graph 29 s and got no cell; a synthetic cell takes ~1.2 s."""
    data, calls = synthetic_cells(monkeypatch, ok, seconds=29.0)
    measured = [c for c in data["cells"] if c["status"] == "ok"]
    assert len(measured) == 12   # 3 paths x 4 batch sizes, each complete at the top draft-token count
    assert [(p, b) for p, b, _, _ in calls[:3]] == [("eagle_draft", 64), ("eagle_draft_extend", 64),
                                                    ("dflash_verify", 64)]
    assert "unmeasured" not in data or data["unmeasured"] is None


def test_with_little_time_some_cells_are_measured_and_the_rest_listed_with_their_need(monkeypatch):
    data, calls = synthetic_cells(monkeypatch, ok, seconds=10.0)
    statuses = [c["status"] for c in data["cells"]]
    assert 0 < statuses.count("ok") < 12
    # The first cells measured are the largest batch size of every path: each path has an answer.
    assert {p for p, b, _, _ in calls[:3]} == {"eagle_draft", "eagle_draft_extend", "dflash_verify"}
    left = [c for c in data["cells"] if c["status"] == "skipped"]
    assert left and all(c["need_s"] == cuda_graph.SYNTHETIC_CELL_S for c in left)
    gap = cells.unmeasured(data["cells"])
    assert gap["cells"] == len(left) and gap["need_s"] == pytest.approx(len(left) * cuda_graph.SYNTHETIC_CELL_S)
    assert all(check(CELL, c, "cell") is None for c in data["cells"])


def test_a_failing_row_is_bisected_after_every_path_has_its_first_answer(monkeypatch):
    def fails_above_8(args, timeout):
        if args["path"] == "dflash_verify" and args["draft_tokens"] > 8:
            return {"status": "capture_failed", "detail": "capture failed", "traceback": ["RuntimeError: x"]}
        return ok(args, timeout)
    data, calls = synthetic_cells(monkeypatch, fails_above_8, options={"batch_sizes": [1, 4]})
    firsts = calls[:6]
    assert all(dt == 16 for _, _, dt, _ in firsts)   # every path's top count before any bisection
    rows = [b for b in data["boundaries"] if b["label"] == "dflash_verify"][0]["rows"]
    assert all(r["max_ok"] == 8 and r["min_fail"] == 9 for r in rows)


def test_every_algorithm_is_launched_at_its_top_count_before_any_bisection(monkeypatch):
    launched = []

    def run_launch(settings, algorithm, sizes, draft_tokens, *rest):
        launched.append((algorithm, draft_tokens))
        status = "capture_failed" if draft_tokens > 3 else "ok"
        return [cells.cell("sglang", algorithm, b, draft_tokens, status, "", "sglang") for b in sizes]
    monkeypatch.setattr(sglang_repro, "run_launch", run_launch)
    ctx = ClockContext(Clock(), 1000.0, {"sglang_source": {"speculative_algorithms": ["EAGLE", "DFLASH"]}})
    settings = cuda_graph.settings_from({"algorithms": ["EAGLE", "DFLASH"], "batch_sizes": [1],
                                         "draft_tokens": [2, 8]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, {}, "", "python3")
    assert launched[:2] == [("EAGLE", 8), ("DFLASH", 8)]
    assert len(launched) == len(set(launched))   # each launch once, the first pass's reused by the bisection
    assert [r["max_ok"] for b in data["boundaries"] for r in b["rows"]] == [3, 3]


def test_a_probe_given_20_s_queries_its_device_and_measures_cells(monkeypatch):
    """The device query is one short child: it keeps back a worker's reserve, not a server group's 20 s (given
    20 s it had 1 s, too little for torch to start, and every cell was skipped)."""
    clock = Clock()

    class Worker(object):
        def __init__(self, modules=None, env=None, python=None):
            pass

        def call(self, handler, args, timeout):
            if handler.endswith(":device_info"):
                clock.now += min(3.0, timeout)   # a fresh child importing torch and asking CUDA
                if timeout < 3.0:
                    return {"status": "timeout", "detail": "no answer within %.0f s; child killed" % timeout}
                return {"status": "ok", "torch": "2.11.0+cu130", "cuda_available": True,
                        "devices": [{"index": 0, "name": "NVIDIA H200", "compute_capability": "sm_90"}]}
            clock.now += 1.0
            return ok(args, timeout)

        def close(self):
            pass

        def remove_logs(self):
            pass
    monkeypatch.setattr(cuda_graph, "Worker", Worker)
    results = {"deployment": {"servers": [], "interpreter": {"path": "python3", "why": "default"}},
               "env": {"gpus": {"status": "ok", "source": "nvidia-smi",
                                "devices": [{"index": 0, "memory_used_mib": 0, "processes": []}]}}}
    ctx = ClockContext(clock, 20.0, results, {"cuda_graph": {"mode": "synthetic"}})
    data = cuda_graph.collect(ctx)
    measured = [c for c in data["cells"] if c["status"] == "ok"]
    assert len(measured) >= 10, data.get("skip_reason")
    assert all(check(CELL, c, "cell") is None for c in data["cells"])
