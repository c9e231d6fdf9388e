"""The cuda_graph probe on a host without CUDA, GPU choice, replay-buffer specs and the eager harness."""
import json
import os

import pytest

from probes import cuda_graph
from probes.context import ProbeContext
from probes import gpu_layer as gpus
from probes.graphrepro import specs, synthetic, synthetic_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, "tests", "fixtures", "logs")


def cpu_only():
    import torch
    return not torch.cuda.is_available()


@pytest.mark.skipif(not cpu_only(), reason="checks the no-CUDA path; this host has CUDA")
def test_without_cuda_every_planned_cell_is_skipped_with_the_reason():
    options = {"cuda_graph": {"algorithms": ["EAGLE", "DFLASH"], "batch_sizes": [1, 8], "draft_tokens": [2, 4],
                              "mode": "synthetic"}}
    data = cuda_graph.collect(ProbeContext(options=options))
    cells = data["cells"]
    assert {(c["path"], c["batch_size"]) for c in cells} == {
        (p, b) for p in ("eagle_draft", "eagle_draft_extend", "dflash_verify") for b in (1, 8)}
    assert all(c["status"] == "skipped" and "no CUDA device" in c["detail"] for c in cells)
    assert data["environment"]["torch"] and data["environment"]["cuda_available"] is False
    assert data["mode"] == "synthetic" and data["skip_reason"].startswith("no CUDA device")
    json.dumps(data)   # stored as JSON


def test_live_server_model_sets_the_dirs_and_the_synthetic_hidden_size(tmp_path):
    model = tmp_path / "Qwen2.5-7B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"hidden_size": 3584, "num_hidden_layers": 28}))
    from probes.graphrepro import live_shapes
    deployment = {"servers": [{"pid": 7, "env": {"HF_HOME": str(tmp_path / "empty-hf-home")},
                               "args": {"model_path": str(model), "speculative_algorithm": "eagle3",
                                        "speculative_draft_model_path": "org/hub-id-draft"}}]}
    settings, notes = cuda_graph.settings_from({}), []
    live_shapes.apply(settings, deployment, set(), notes)
    live_shapes.hidden_size_from_model(settings, False, notes)
    assert settings["model"] == str(model) and settings["hidden_size"] == 3584
    assert settings["draft_model"] is None and "org/hub-id-draft is neither a local directory" in notes[1]
    explicit = cuda_graph.settings_from({"hidden_size": 512, "model": str(model)})
    live_shapes.hidden_size_from_model(explicit, True, [])
    assert explicit["hidden_size"] == 512


def test_busy_gpus_are_refused_unless_forced_and_live_server_gpus_are_busy():
    devices = [{"index": 0, "memory_used_mib": 70000, "processes": [{"pid": 11, "name": "python"}]},
               {"index": 1, "memory_used_mib": 3, "processes": []},
               {"index": 2, "memory_used_mib": 3, "processes": []},
               {"index": 3, "memory_used_mib": 2048, "processes": []}]
    servers = [{"pid": 99, "cuda_visible_devices": "2", "args": {"tp_size": 1}}]
    reasons = gpus.busy_reasons(devices, servers)
    assert sorted(reasons) == [0, 2, 3] and reasons[2] == "serving sglang (pid 99): " + gpus.NEVER
    assert reasons[3] == "2048 MiB in use (idle limit 1024 MiB)"
    assert gpus.select_gpus([0, 1, 2, 3], reasons, 1, False) == ([1], None)
    chosen, why = gpus.select_gpus([0, 1, 2, 3], reasons, 2, False)
    assert chosen is None and "--force" in why and "GPU0: 1 compute process(es): python (pid 11)" in why
    assert gpus.select_gpus([0, 1, 2, 3], reasons, 2, True) == ([1, 0], None)
    protected = gpus.protected_gpus(servers)
    assert protected == {2}
    assert gpus.select_gpus([0, 1, 2, 3], reasons, 3, True, protected) == ([1, 0, 3], None)
    chosen, why = gpus.select_gpus([0, 1, 2, 3], reasons, 4, True, protected)
    assert chosen is None and "GPU2" in why and "never used" in why
    assert gpus.select_gpus([0], {}, 2, True)[1] == "needs 2 GPU(s), the host has 1"


def test_server_without_visible_devices_occupies_its_tp_range():
    assert gpus.server_gpus({"args": {"tp_size": 4, "base_gpu_id": 2}}) == [2, 3, 4, 5]


def test_replay_buffers_follow_batch_size_topk_steps_and_draft_tokens():
    draft = {s["name"]: s for s in specs.buffer_specs("eagle_draft", 4, 7, topk=2, hidden_size=256)}
    assert "input_ids" not in draft and draft["out_cache_loc"]["shape"] == [8 * 3]
    assert draft["topk_p"] == {"name": "topk_p", "dtype": "float32", "src_dtype": "float32", "shape": [4, 2],
                               "large": False}
    assert draft["hidden_states"]["large"] and draft["hidden_states"]["shape"] == [4, 256]
    assert draft["req_pool_indices"]["dtype"] == draft["seq_lens"]["dtype"] == "int64"   # 0.5.23's buffers
    extend = {s["name"]: s for s in specs.buffer_specs("eagle_draft_extend", 4, 7)}
    assert extend["hidden_states"]["shape"] == [28, 1024] and extend["num_accept_tokens"]["dtype"] == "int32"
    assert extend["select_index"]["shape"] == [4]
    old = {s["name"]: s for s in specs.buffer_specs("eagle_draft_extend", 4, 7, release="0.5.11")}
    assert old["seq_lens"]["dtype"] == "int32" and old["seq_lens"]["src_dtype"] == "int64"
    assert "num_accepted_tokens" in old and "select_index" not in old
    verify = [s["name"] for s in specs.buffer_specs("dflash_verify", 2, 16)]
    assert verify == ["input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"]
    with pytest.raises(ValueError, match="unknown replay path"):
        specs.buffer_specs("medusa", 1, 2)


@pytest.mark.parametrize("path", specs.PATHS)
def test_eager_forward_and_grouped_copy_on_cpu(path):
    torch = pytest.importorskip("torch")
    spec_list = specs.buffer_specs(path, 3, 5, topk=2, hidden_size=64)
    generator = torch.Generator().manual_seed(0)
    weights = synthetic.make_weights(torch, 64, "cpu")
    static = synthetic.make_buffers(torch, spec_list, "cpu", generator)
    fresh = synthetic.make_buffers(torch, spec_list, "cpu", generator)
    per_request = specs.tokens_per_request(path, 5, 2)
    before = synthetic.forward(torch, static, weights, path, 3, per_request, 2, specs.eagle_steps(5, 2))
    synthetic.copy_inputs(static, fresh, spec_list)
    assert all(torch.equal(static[s["name"]], fresh[s["name"]]) for s in spec_list)
    after = synthetic.forward(torch, static, weights, path, 3, per_request, 2, specs.eagle_steps(5, 2))
    assert after["logits"].shape == (3 * per_request, synthetic_model.VOCAB)
    assert after["topk_index"].shape == (3 * per_request, 2)
    assert torch.isfinite(after["logits"]).all()
    assert not torch.equal(before["logits"], after["logits"])   # the copied inputs reach the output


def test_failures_are_classified_by_stage_and_device_fault_text():
    fault = synthetic._failure("replay", RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert fault["status"] == "device_fault"
    assert synthetic._failure("capture", RuntimeError("operation not permitted when stream is capturing"))[
        "status"] == "capture_failed"
    assert synthetic._failure("replay", TypeError("bad"))["status"] == "replay_failed"


class FakeCuda:
    """torch.cuda stand-in on CPU: capture runs the forward once and replay does nothing."""

    def __init__(self, torch, total_mib=81920):
        self.torch = torch
        self.total_mib = total_mib
        self.fractions = []

    def install(self, monkeypatch):
        cuda, real_device = self.torch.cuda, self.torch.device
        monkeypatch.setattr(cuda, "is_available", lambda: True)
        monkeypatch.setattr(cuda, "synchronize", lambda *a: None)
        monkeypatch.setattr(cuda, "Stream", lambda *a, **k: type("S", (), {"wait_stream": lambda s, o: None})())
        monkeypatch.setattr(cuda, "current_stream", lambda *a: type("S", (), {"wait_stream": lambda s, o: None})())
        monkeypatch.setattr(cuda, "stream", lambda s: _Null())
        monkeypatch.setattr(cuda, "CUDAGraph", lambda: type("G", (), {"replay": lambda g: None})())
        monkeypatch.setattr(cuda, "graph", lambda g, **k: _Null())
        monkeypatch.setattr(self.torch, "device", lambda kind, index=None: real_device("cpu"))
        props = type("P", (), {"total_memory": self.total_mib << 20})()
        monkeypatch.setattr(cuda, "get_device_properties", lambda device=None: props)
        monkeypatch.setattr(cuda, "set_per_process_memory_fraction",
                            lambda fraction, device=None: self.fractions.append(fraction))


class _Null(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_graph_that_replays_stale_outputs_is_a_mismatch(monkeypatch):
    """A replay that does not recompute leaves the capture-time outputs: the eager check must see it."""
    torch = pytest.importorskip("torch")
    FakeCuda(torch).install(monkeypatch)
    result = synthetic.run_cell({"path": "dflash_verify", "batch_size": 2, "draft_tokens": 4, "hidden_size": 64})
    assert result["status"] == "mismatch"
    assert result["max_abs_diff"] > 0 and "differs from eager" in result["detail"]
    assert result["fields"] == ["input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"]
    assert result["capture_s"] >= 0 and result["fields_of"] == "0.5.23" and result["copies"] == "grouped"


def test_the_harness_copies_with_the_copy_benchs_own_grouped_copy():
    from probes import foreach_copy
    from probes.copybench import strategies
    assert synthetic.grouped_foreach_copy is strategies.grouped_foreach_copy is foreach_copy.grouped_foreach_copy


def test_the_harness_copies_as_the_release_does(monkeypatch):
    """0.5.11 copies every EAGLE field with copy_(); 0.5.23 groups all but hidden_states."""
    torch = pytest.importorskip("torch")
    grouped = []
    monkeypatch.setattr(synthetic, "grouped_foreach_copy", lambda d, s: grouped.append(len(d)))
    for release, expected in (("0.5.11", [0]), ("0.5.23", [6])):
        del grouped[:]
        spec_list = specs.buffer_specs("eagle_draft", 2, 4, topk=2, hidden_size=32, release=release)
        static = synthetic.make_buffers(torch, spec_list, "cpu", torch.Generator().manual_seed(0))
        fresh = synthetic.make_buffers(torch, spec_list, "cpu", torch.Generator().manual_seed(1), dtype_key="src_dtype")
        synthetic.copy_inputs(static, fresh, spec_list, specs.copies_grouped("eagle_draft", release))
        assert grouped == expected, release
        assert torch.equal(static["hidden_states"], fresh["hidden_states"])
        if release == "0.5.11":   # every field went through copy_(), casts included
            assert static["seq_lens"].dtype == torch.int32 and torch.equal(static["seq_lens"].long(), fresh["seq_lens"])


def test_a_replay_that_produces_nan_is_a_mismatch_not_an_exact_match(monkeypatch):
    """The captured forward writes a NaN: Python's max() would skip it and call the replay exact."""
    torch = pytest.importorskip("torch")
    FakeCuda(torch).install(monkeypatch)
    real, calls = synthetic.forward, []

    def forward(*args):
        out = real(*args)
        calls.append(1)
        if len(calls) == 3:   # two warm-ups, then the capture
            out["logits"][0, 0] = float("nan")
        return out
    monkeypatch.setattr(synthetic, "forward", forward)
    result = synthetic.run_cell({"path": "eagle_draft", "batch_size": 2, "draft_tokens": 4, "topk": 1,
                                 "hidden_size": 64})
    assert result["status"] == "mismatch" and "NaN or Inf" in result["detail"]
    assert result["max_abs_diff"] is None and result["non_finite"] == synthetic.REPLAY_TRIALS
    json.dumps(result, allow_nan=False)


def test_replay_comparison_fails_on_nan_or_inf_and_passes_within_tolerance():
    nan, inf = float("nan"), float("inf")
    assert synthetic.compare_replays([0.001, 0.002], [1.0]) == {"status": "ok", "max_abs_diff": 0.002}
    assert synthetic.compare_replays([0.0, nan], [1.0])["status"] == "mismatch"
    assert synthetic.compare_replays([0.0], [inf])["max_abs_diff"] is None
    assert synthetic.compare_replays([0.5], [1.0])["detail"] == "graph replay differs from eager by 0.5"
    assert synthetic.compare_replays([0.0], [1.0], non_finite=4)["non_finite"] == 4


def test_synthetic_cells_run_under_the_memory_cap_and_larger_ones_are_skipped(monkeypatch):
    torch = pytest.importorskip("torch")
    fake = FakeCuda(torch, total_mib=8192)
    fake.install(monkeypatch)
    args = {"path": "eagle_draft_extend", "batch_size": 2, "draft_tokens": 3, "hidden_size": 64}
    result = synthetic.run_cell(dict(args, max_mem_mib=1024))
    assert result["status"] == "mismatch" and result["memory_cap_mib"] == 1024   # ran (the fake replays stale)
    assert fake.fractions == [1024 / 8192.0]
    assert 0 < result["estimated_mib"] <= 1024
    assert synthetic.run_cell(args)["memory_cap_mib"] == synthetic.DEFAULT_MAX_MEM_MIB   # 4096 by default
    big = synthetic.run_cell(dict(args, batch_size=64, draft_tokens=16, hidden_size=8192, max_mem_mib=1024))
    assert big["status"] == "skipped" and "above the memory cap of 1024 MiB" in big["detail"]
    assert big["estimated_mib"] > 1024 and len(fake.fractions) == 2   # nothing allocated for the skipped cell
    # A cap above the card is the card.
    assert synthetic.run_cell(dict(args, max_mem_mib=100000))["memory_cap_mib"] == 8192 and fake.fractions[-1] == 1.0


def test_an_allocation_over_the_cap_is_a_skipped_cell_not_a_graph_failure(monkeypatch):
    torch = pytest.importorskip("torch")
    FakeCuda(torch).install(monkeypatch)

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    monkeypatch.setattr(synthetic, "make_weights", out_of_memory)
    result = synthetic.run_cell({"path": "dflash_verify", "batch_size": 2, "draft_tokens": 4, "hidden_size": 64,
                                 "max_mem_mib": 512})
    assert result["status"] == "skipped" and result["detail"].startswith("over the memory cap of 512 MiB")


def test_synthetic_sweep_gives_each_cell_the_memory_cap_and_only_the_time_left(monkeypatch):
    import time
    calls = []

    class CellWorker(object):
        def __init__(self, modules=None, env=None, python=None):
            pass

        def call(self, handler, args, timeout):
            calls.append((handler, args, timeout))
            return {"status": "ok", "max_abs_diff": 0.0, "memory_cap_mib": args["max_mem_mib"], "estimated_mib": 9}

        def close(self):
            pass

        def remove_logs(self):
            pass
    monkeypatch.setattr(cuda_graph, "Worker", CellWorker)
    settings = cuda_graph.settings_from({"algorithms": ["DFLASH"], "batch_sizes": [1, 4], "draft_tokens": [2, 4],
                                         "max_mem_mib": 1536})
    data = {"cells": [], "boundaries": [], "notes": []}
    ctx = ProbeContext(deadline=time.monotonic() + 100)
    cuda_graph.run_synthetic(ctx, settings, data, {}, "", "python3")
    assert calls and all(h == "probes.graphrepro.synthetic:run_cell" for h, _, _ in calls)
    assert all(a["max_mem_mib"] == 1536 for _, a, _ in calls)
    assert all(t <= 100 - cuda_graph.SYNTHETIC_RESERVE_SECONDS for _, _, t in calls)   # never the 120 s timeout
    assert all(c["memory_cap_mib"] == 1536 and c["estimated_mib"] == 9 for c in data["cells"])
    assert cuda_graph.settings_from({})["max_mem_mib"] == 4096


@pytest.mark.parametrize("release", ("0.5.11", "0.5.14", "0.5.23"))
@pytest.mark.parametrize("path", specs.PATHS)
def test_every_release_table_runs_through_the_harness(monkeypatch, path, release):
    """Each release's fields build, copy (casts included) and reach the forward; the fake replays stale."""
    torch = pytest.importorskip("torch")
    FakeCuda(torch).install(monkeypatch)
    result = synthetic.run_cell({"path": path, "batch_size": 2, "draft_tokens": 3, "topk": 2, "hidden_size": 32,
                                 "release": release})
    assert result["status"] == "mismatch" and "differs from eager" in result["detail"], result
    assert result["fields_of"] == release
    assert result["fields"] == [s["name"] for s in specs.buffer_specs(path, 2, 3, topk=2, hidden_size=32,
                                                                          release=release)]
