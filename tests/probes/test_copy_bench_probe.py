"""The copy_bench probe's collect() on the CPU: the data shape, the installed release's own copy functions
(a stand-in sglang package on sys.path), and errors for bad options."""
import os
import sys
import textwrap
import time
import types

import pytest

torch = pytest.importorskip("torch")

from probes import copy_bench  # noqa: E402
from probes.context import ProbeContext, Skip  # noqa: E402
from probes.copybench import options  # noqa: E402

TINY = {"device": "cpu", "batch_sizes": [2], "hidden_sizes": [64], "sweep_min_bytes": 1024, "sweep_max_bytes": 16384,
        "samples": 3, "target_us": 20, "max_iters": 5, "draft_tokens": 4}

GROUPED = '''
import torch
CALLS = []
def _grouped_foreach_copy_(dsts, srcs):
    CALLS.append(len(dsts))
    groups = {}
    for d, s in zip(dsts, srcs):
        groups.setdefault((d.dtype, s.dtype), ([], []))
        groups[(d.dtype, s.dtype)][0].append(d)
        groups[(d.dtype, s.dtype)][1].append(s)
    for ds, ss in groups.values():
        torch._foreach_copy_(ds, ss)
'''
LOOP_WITH_BUG = '''
def _grouped_foreach_copy_(dsts, srcs):
    for d, s in zip(dsts[1:], srcs[1:]):   # forgets the first field
        d.copy_(s)
'''


@pytest.fixture(autouse=True)
def probing_python_serves(monkeypatch):
    """The probing Python is the chosen one: a stand-in server of another test must not move the child."""
    from probes.hostinfo import interpreter
    monkeypatch.setattr(interpreter, "target", lambda ctx: {"path": sys.executable, "why": "default"})


@pytest.fixture
def fake_sglang(tmp_path, monkeypatch):
    """A stand-in sglang with two definitions (one of them wrong) and a module that fails to import."""
    base = tmp_path / "sglang" / "srt" / "model_executor"
    base.mkdir(parents=True)
    for folder in (tmp_path / "sglang", tmp_path / "sglang" / "srt", base):
        (folder / "__init__.py").write_text("")
    (base / "runner.py").write_text(textwrap.dedent(GROUPED))
    (base / "input_buffers.py").write_text(textwrap.dedent(LOOP_WITH_BUG))
    (base / "broken.py").write_text("raise ImportError('needs sgl_kernel')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        del sys.modules[name]


def test_without_sglang_source_the_release_modules_of_0_5_14_on_are_tried(tmp_path, monkeypatch):
    from probes.copybench import strategies
    base = tmp_path / "sglang" / "srt" / "model_executor"
    for folder in (base / "runner_utils", base / "runner"):
        folder.mkdir(parents=True)
    for folder in (tmp_path / "sglang", tmp_path / "sglang" / "srt", base, base / "runner_utils"):
        (folder / "__init__.py").write_text("")
    (base / "runner_utils" / "buffers.py").write_text(textwrap.dedent(GROUPED))
    (base / "cuda_graph_buffer_registry.py").write_text(textwrap.dedent(GROUPED))
    (base / "runner" / "__init__.py").write_text(   # the runner package re-exports the buffers' definition
        "from sglang.srt.model_executor.runner_utils.buffers import _grouped_foreach_copy_\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        loaded, failed = strategies.load_installed(None)
    finally:
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]
    assert [item["module"] for item in loaded] == ["sglang.srt.model_executor.runner_utils.buffers",
                                                   "sglang.srt.model_executor.cuda_graph_buffer_registry"]
    assert failed == []


GATED = '''
import os
import torch
SEEN = []
def _grouped_foreach_copy_(dsts, srcs):
    SEEN.append(os.getenv("SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"))   # read on every call, as 0.5.23 does
    torch._foreach_copy_(dsts, srcs) if SEEN[-1] == "1" else [d.copy_(s) for d, s in zip(dsts, srcs)]
'''


def test_an_env_gated_fast_path_is_timed_on_and_off(tmp_path, monkeypatch):
    base = tmp_path / "sglang" / "srt" / "model_executor"
    base.mkdir(parents=True)
    for folder in (tmp_path / "sglang", tmp_path / "sglang" / "srt", base):
        (folder / "__init__.py").write_text("")
    (base / "cuda_graph_buffer_registry.py").write_text(textwrap.dedent(GATED))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH", raising=False)
    try:
        data = copy_bench.collect(ProbeContext(options={"copy_bench": dict(TINY, paths=["dflash_verify"],
                                                                           batch_sizes=[2], isolate=False)}))
        seen = set(sys.modules["sglang.srt.model_executor.cuda_graph_buffer_registry"].SEEN)
    finally:
        for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
            del sys.modules[name]
    installed = data["gpus"][0]["workloads"][0]["strategies"]["installed"]
    assert installed["status"] == "ok"
    gate = installed["env"]["SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"]
    assert gate["host_value"] is None and seen == {None, "1", "0"}
    assert gate["on"]["status"] == "ok" and gate["on"]["env"] == "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH=1"
    assert gate["off"]["status"] == "ok" and gate["off"]["median_us"] > 0
    assert "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH" not in os.environ   # the host's value is back


def source_facts():
    return {"found": True, "version": "0.5.14", "grouped_foreach_copy": {
        "definitions": [{"module": "sglang.srt.model_executor.runner"},
                        {"module": "sglang.srt.model_executor.input_buffers"},
                        {"module": "sglang.srt.model_executor.broken"}],
        "call_sites": [{"qualname": "EAGLEDraftExtendCudaGraphRunner.execute",
                        "fields": ["input_ids", "seq_lens", "out_cache_loc", "positions", "req_pool_indices"],
                        "resolves_to": {"module": "sglang.srt.model_executor.runner"}},
                       {"qualname": "DecodeInputBuffers.populate_from_forward_batch",
                        "fields": ["input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"],
                        "resolves_to": {"module": "sglang.srt.model_executor.input_buffers"}}]}}


def test_installed_definitions_are_measured_as_the_release_calls_them(fake_sglang):
    ctx = ProbeContext(options={"copy_bench": dict(TINY, paths=["eagle_draft_extend", "dflash_verify"],
                                                   isolate=False)},
                       results={"sglang_source": source_facts()})
    data = copy_bench.collect(ctx)
    extend, verify = data["gpus"][0]["workloads"]
    installed = extend["strategies"]["installed"]
    assert installed["status"] == "ok" and installed["module"] == "sglang.srt.model_executor.runner"
    assert installed["hidden_states_separate"] is True
    assert installed["variants"]["sglang.srt.model_executor.input_buffers"]["status"] == "wrong"
    assert "import failed: ImportError: needs sgl_kernel" in installed["not_loaded"][0]["reason"]
    runner = sys.modules["sglang.srt.model_executor.runner"]
    assert 5 in runner.CALLS and 6 not in runner.CALLS      # hidden_states never went through it
    assert extend["installed_baseline"]["strategy"] == "installed"
    assert extend["saving_vs_installed_us"] == pytest.approx(
        installed["median_us"] - extend["strategies"][extend["best"]]["median_us"], abs=1e-3)
    # The generic path resolves to the wrong definition: never timed, and no saving claimed against it.
    assert verify["strategies"]["installed"]["status"] == "wrong"
    assert verify["saving_vs_installed_us"] is None
    assert data["installed"]["behaviour"]["eagle_draft"]["kind"] == "unknown"


def test_probe_data_shape_on_the_cpu():
    data = copy_bench.collect(ProbeContext(options={"copy_bench": dict(TINY, paths=["eagle_draft"])}))
    # Run by default in a child of the chosen interpreter, on the CPU too.
    assert data["device"] == "cpu" and data["method"] == "perf_counter" and data["isolated"] is True
    assert data["interpreter"] == {"path": sys.executable, "why": "default", "ran": "child"}
    assert data["python"] == sys.executable and data["torch_version"] == torch.__version__
    (cpu,) = data["gpus"]
    assert cpu["status"] == "ok" and cpu["name"] == "cpu" and cpu["threads"] == 1
    assert [r["bytes"] for r in cpu["sweep"]] == [1024, 4096, 16384]
    assert all(r["copy"]["status"] == "ok" and r["foreach"]["status"] == "ok" for r in cpu["sweep"])
    (workload,) = cpu["workloads"]
    assert workload["name"] == "eagle_draft/bs2/h64"
    assert workload["strategies"]["installed"]["status"] == "skipped"
    assert "sglang is not importable" in workload["strategies"]["installed"]["reason"]
    assert cpu["h2d"] is None and "CUDA only" in cpu["h2d_reason"]
    assert cpu["recommended_split_bytes"] is None and "no copy engine" in cpu["split_reason"]
    assert data["summary"]["recommended_split_bytes"] is None
    assert data["settings"]["batch_sizes"] == [2] and data["settings_source"]["batch_sizes"] == "option"


def test_bad_options_raise_a_one_line_error():
    with pytest.raises(options.OptionError, match="copy_bench.hidden_dtype: expected one of"):
        copy_bench.collect(ProbeContext(options={"copy_bench": {"hidden_dtype": "int4"}}))
    if not torch.cuda.is_available():
        with pytest.raises(Skip, match="device=cuda but torch"):
            copy_bench.collect(ProbeContext(options={"copy_bench": {"device": "cuda"}}))


def test_an_interpreter_without_torch_is_a_skip_naming_it(tmp_path, monkeypatch):
    from probes.hostinfo import interpreter
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nexec %s -S "$@"\n' % sys.executable)   # -S: no site-packages, no torch
    python.chmod(0o755)
    monkeypatch.setattr(interpreter, "target", lambda ctx: {"path": str(python), "why": "live_server"})
    with pytest.raises(Skip) as caught:
        copy_bench.collect(ProbeContext(options={"copy_bench": dict(TINY, paths=["eagle_draft"])}))
    assert str(caught.value).startswith("under %s (live_server): skipped: torch is not importable" % python)


def test_a_crashing_child_becomes_an_error_result_not_a_crash():
    from probes.copybench.child import run_isolated
    deadline = time.monotonic() + 90
    (died,) = run_isolated({"device": "cpu"}, None, deadline)          # dies before its first device
    assert died["index"] is None and died["status"] == "error"
    assert died["reason"].startswith("benchmark process failed: ") and "KeyError: 'strategies'" in died["reason"]
    (failed,) = run_isolated({"device": "cpu", "strategies": ["loop"]}, None, deadline)  # fails on the device
    assert failed == {"index": None, "name": "cpu", "status": "error", "reason": "KeyError: 'max_mem_mib'"}


class FakeCuda(object):
    """Just enough of torch.cuda for the idle check: a GPU that another process fills."""

    def __init__(self):
        self.calls = []

    def get_device_properties(self, index):
        return types.SimpleNamespace(name="NVIDIA H200", uuid="6513270e-269e-4d37-b2a7-4de452e6b438",
                                     major=9, minor=0, total_memory=143771 * 1024 * 1024)

    def mem_get_info(self, index):
        self.calls.append("mem_get_info")
        return 10 * 1024 * 1024 * 1024, 140 * 1024 * 1024 * 1024

    def __getattr__(self, name):        # anything that would allocate or change device state
        raise AssertionError("torch.cuda.%s called on a busy GPU" % name)


def test_a_busy_gpu_is_refused_before_anything_is_allocated():
    from probes import gpu_layer
    from probes.copybench.devices import bench_one
    fake = types.SimpleNamespace(cuda=FakeCuda())
    uuid = "GPU-6513270e-269e-4d37-b2a7-4de452e6b438"
    busy = [{"index": 0, "uuid": uuid, "memory_used_mib": 61000,
             "processes": [{"pid": 3141, "name": "python3", "used_memory_mib": 61000}]}]
    job = {"busy_memory_mib": 1024, "max_mem_mib": 2048, "unit_s": copy_bench.PROBE["unit_s"], "force": False,
           "gpu_policy": copy_bench.gpu_policy({"devices": busy, "source": "env"}, [], False, 1024, 1)}
    result = bench_one(fake, job, 0, None, None, None)
    assert result["status"] == "skipped" and result["device"] == "cuda" and result["compute_capability"] == "sm_90"
    assert result["reason"] == "busy: 1 compute process(es): python3 (pid 3141); " + gpu_layer.FORCE_HINT
    assert result["idle_check"]["kind"] == "busy" and fake.cuda.calls == []


def test_a_live_servers_gpu_is_never_benchmarked_even_forced_and_unknown_idleness_is_busy():
    from probes import gpu_layer
    from probes.copybench.devices import bench_one
    fake = types.SimpleNamespace(cuda=FakeCuda())
    idle = [{"index": 0, "uuid": "GPU-6513270e-269e-4d37-b2a7-4de452e6b438", "memory_used_mib": 2, "processes": []}]
    servers = [{"pid": 77, "cuda_visible_devices": "0", "args": {"port": 30000}}]
    job = {"busy_memory_mib": 1024, "max_mem_mib": 2048, "unit_s": copy_bench.PROBE["unit_s"], "force": True,
           "gpu_policy": copy_bench.gpu_policy({"devices": idle, "source": "env"}, servers, True, 1024, 1)}
    result = bench_one(fake, job, 0, None, None, None)
    assert result["status"] == "skipped"
    assert result["reason"] == "serving sglang (pid 77, port 30000): " + gpu_layer.NEVER
    unknown = copy_bench.gpu_policy({"devices": None, "why": "nvidia-smi: not found"}, servers, False, 1024, 2)
    assert unknown == {"table": None, "why": "nvidia-smi: not found", "protected": [0]}
    job = dict(job, force=False, gpu_policy=unknown)
    assert "never touched" in bench_one(fake, job, 0, None, None, None)["reason"]
    refused = bench_one(fake, job, 1, None, None, None)
    assert refused["reason"].startswith("busy: its compute processes cannot be listed (nvidia-smi: not found)")
    assert fake.cuda.calls == []
