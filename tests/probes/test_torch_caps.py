"""torch_caps on the real CPU torch, and on fake torch modules: one without `_foreach_copy_`, one broken."""
import sys
import types

import pytest

torch = pytest.importorskip("torch")

from probes import torch_caps  # noqa: E402
from probes.hostinfo import foreach_checks  # noqa: E402
from probes.context import ProbeContext, Skip  # noqa: E402

EXPECTED_PAIRS = {"int64->int64", "int32->int32", "int32->int64", "float32->bfloat16", "bfloat16->bfloat16",
                  "float32->float32"}


class TorchView(types.ModuleType):
    """The real torch, seen through a module that can hide or replace attributes."""

    def __init__(self, hidden=(), replaced=None):
        super().__init__("torch")
        self._hidden = set(hidden)
        self._replaced = dict(replaced or {})

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        if name in self._replaced:
            return self._replaced[name]
        return getattr(torch, name)


@pytest.fixture(autouse=True)
def probing_python_serves(monkeypatch):
    """These checks run here: a stand-in sglang server of another test on this machine must not move them."""
    from probes.hostinfo import interpreter
    monkeypatch.setattr(interpreter, "target", lambda ctx: {"path": sys.executable, "why": "default"})


def collect_with(monkeypatch, fake, options=None):
    monkeypatch.setitem(sys.modules, "torch", fake)
    return torch_caps.collect_here(ProbeContext(options=options or {}))


def test_real_cpu_torch_verifies_every_pair():
    data = torch_caps.collect(ProbeContext(options={"torch_caps": {"cuda": False}}))
    assert data["torch_version"] == torch.__version__
    assert data["has_foreach_copy"] is hasattr(torch, "_foreach_copy_") is True
    cpu = data["checks"]["cpu"]
    assert EXPECTED_PAIRS <= set(cpu["pairs"])
    assert all(value == "ok" for value in cpu["pairs"].values()), cpu["pairs"]
    assert cpu["ok"] is True and cpu["method"] == "foreach_copy"
    assert cpu["mixed_pairs_one_call"] == "ok"
    assert cpu["non_contiguous"] == "ok"
    assert cpu["mismatched_shapes"].startswith("raises: RuntimeError:")
    assert list(data["checks"]) == ["cpu"]
    # The CPU kernel is a copy_ loop whatever the list (native_functions.yaml dispatch): never fused.
    assert set(cpu["paths"]) == {"contiguous_same_dtype", "non_contiguous", "mixed_pairs_one_call"}
    assert {p["path"] for p in cpu["paths"].values()} == {"per_tensor"}
    assert "foreach_tensor_copy_list_kernel_slow_" in cpu["paths"]["non_contiguous"]["source"]
    # Run by the probe in a child of the chosen interpreter: the probe's own process imports no torch.
    assert data["interpreter"] == {"path": sys.executable, "why": "default", "ran": "child"}


def test_without_foreach_copy_reports_the_loop_fallback(monkeypatch):
    data = collect_with(monkeypatch, TorchView(hidden={"_foreach_copy_"}))
    assert data["has_foreach_copy"] is False
    assert data["method"] == "loop"
    cpu = data["checks"]["cpu"]
    assert cpu["method"] == "loop" and cpu["ok"] is True
    assert EXPECTED_PAIRS <= set(cpu["pairs"]) and set(cpu["pairs"].values()) == {"ok"}
    assert cpu["mixed_pairs_one_call"].startswith("skipped: torch has no _foreach_copy_")
    assert cpu["paths"]["contiguous_same_dtype"] == {"path": "per_tensor", "how": "no_foreach_copy",
                                                     "reason": "sglang loops copy_"}


def test_a_foreach_copy_that_drops_tensors_is_caught(monkeypatch):
    def copies_only_the_first(dst, src, non_blocking=False):
        dst[0].copy_(src[0])

    data = collect_with(monkeypatch, TorchView(replaced={"_foreach_copy_": copies_only_the_first}))
    cpu = data["checks"]["cpu"]
    assert cpu["ok"] is False
    assert cpu["pairs"]["int64->int64"].startswith("wrong: tensor 1 differs")
    assert cpu["mismatched_shapes"] == "ok"       # it accepted shapes that do not match: recorded as such


def test_a_foreach_copy_that_rejects_mixed_dtypes_is_recorded(monkeypatch):
    def one_dtype_only(dst, src, non_blocking=False):
        if len({(d.dtype, s.dtype) for d, s in zip(dst, src)}) > 1:
            raise RuntimeError("expected all tensors to share one dtype pair")
        torch._foreach_copy_(dst, src, non_blocking=non_blocking)

    cpu = collect_with(monkeypatch, TorchView(replaced={"_foreach_copy_": one_dtype_only}))["checks"]["cpu"]
    assert cpu["ok"] is True
    assert cpu["mixed_pairs_one_call"] == "raises: RuntimeError: expected all tensors to share one dtype pair"


def test_no_torch_is_a_skip(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(Skip, match="torch is not importable"):
        torch_caps.collect_here(ProbeContext())


def env_result(devices, status="ok", servers=None):
    results = {"env": {"gpus": {"status": status, "source": "nvidia-smi", "devices": devices,
                                "reason": None if status == "ok" else "nvidia-smi not found on PATH"}}}
    if servers:
        results["deployment"] = {"servers": servers}
    return results


def test_gpu_policy_from_env_results_and_live_servers():
    devices = [
        {"index": 0, "uuid": "GPU-a", "processes": [], "memory_used_mib": 3},
        {"index": 1, "uuid": "GPU-b", "processes": [{"pid": 7, "name": "python3", "used_memory_mib": 900}],
         "memory_used_mib": 900},
        {"index": 2, "uuid": "GPU-c", "processes": None, "memory_used_mib": 0},
        {"index": 3, "uuid": "GPU-d", "processes": [], "memory_used_mib": 70000},
        {"index": 4, "uuid": "GPU-e", "processes": [], "memory_used_mib": 0},
    ]
    servers = [{"pid": 99, "cuda_visible_devices": "GPU-e", "args": {"port": 30000}}]
    uuids = ["GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e", "GPU-unlisted"]
    refusals = torch_caps.gpu_refusals(ProbeContext(results=env_result(devices, servers=servers)), {}, uuids, False)
    assert 0 not in refusals
    assert refusals[1] == "busy: 1 compute process(es): python3 (pid 7); pass --force to use busy GPUs"
    assert "cannot be listed: counted as busy" in refusals[2] and "70000 MiB in use" in refusals[3]
    assert refusals[4] == "serving sglang (pid 99, port 30000): never touched, not even with --force"
    assert "not in nvidia-smi's GPU list" in refusals[5]
    # --force overrides "busy with something else", never a live server's GPU.
    forced = torch_caps.gpu_refusals(ProbeContext(results=env_result(devices, servers=servers)), {}, uuids, True)
    assert sorted(forced) == [4, 5]


def test_unknown_idleness_blocks_every_gpu_and_force_spares_only_the_servers(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    ctx = ProbeContext(results=env_result([], status="skipped", servers=[{"pid": 5, "cuda_visible_devices": "1"}]))
    refusals = torch_caps.gpu_refusals(ctx, {}, ["GPU-a", "GPU-b"], False)
    assert sorted(refusals) == [0, 1] and "--force" in refusals[0] and "never touched" in refusals[1]
    assert sorted(torch_caps.gpu_refusals(ctx, {}, ["GPU-a", "GPU-b"], True)) == [1]


class FakeCuda(object):
    """torch.cuda of a two-GPU host, for the device-selection logic (tensors still go to the real torch)."""

    def __init__(self, uuids):
        self.uuids = uuids

    def is_available(self):
        return True

    def device_count(self):
        return len(self.uuids)

    def get_device_properties(self, index):
        return types.SimpleNamespace(uuid=self.uuids[index])

    def synchronize(self, index=None):
        pass

    def empty_cache(self):
        pass


def test_only_idle_gpus_are_checked_and_force_overrides(monkeypatch):
    devices = [{"index": 0, "uuid": "GPU-a", "processes": [{"pid": 11}], "memory_used_mib": 5000},
               {"index": 1, "uuid": "GPU-b", "processes": [], "memory_used_mib": 0}]
    fake = TorchView(replaced={"cuda": FakeCuda(["a", "GPU-b"])})
    monkeypatch.setitem(sys.modules, "torch", fake)
    checks = torch_caps.collect_here(ProbeContext(results=env_result(devices)))["checks"]
    assert checks["cuda:0"]["status"] == "skipped" and "pid 11" in checks["cuda:0"]["reason"]
    # cuda:1 is idle, so it was attempted (on this CPU-only torch the tensors cannot be made there).
    assert checks["cuda:1"]["status"] == "ok" and checks["cuda:1"]["ok"] is False
    forced = torch_caps.collect_here(ProbeContext(options={"force": True}, results=env_result(devices)))["checks"]
    assert forced["cuda:0"].get("reason") is None and "pairs" in forced["cuda:0"]
    off = torch_caps.collect_here(ProbeContext(options={"torch_caps": {"cuda": False}}))["checks"]
    assert list(off) == ["cpu"]


def test_idleness_from_nvidia_smi_when_env_did_not_run(tmp_path, monkeypatch):
    import os
    import stat
    fixtures = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia-smi")
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$*\" in\n  *--query-gpu=*) cat %s/h200x8-query-gpu.csv ;;\n"
                      "  *--query-compute-apps=*) cat %s/h200x8-compute-apps.csv ;;\n  *) exit 0 ;;\nesac\n"
                      % (fixtures, fixtures))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tmp_path)
    uuids = [line.split(", ")[2] for line in open(os.path.join(fixtures, "h200x8-query-gpu.csv")) if line.strip()]
    refusals = torch_caps.gpu_refusals(ProbeContext(), {}, uuids, False)
    assert len(refusals) == 8 and all("sglang::scheduler_TP" in r and "(pid 482" in r for r in refusals.values())


def test_non_blocking_is_a_host_device_check_not_applicable_on_the_cpu():
    cpu = foreach_checks.check_device(torch, "cpu", True)
    assert cpu["non_blocking"] == foreach_checks.NON_BLOCKING_CPU and "pinned host memory" in cpu["non_blocking"]
    assert "non_blocking_directions" not in cpu


def test_non_blocking_summary_names_the_direction_that_went_wrong():
    assert foreach_checks.summarize_non_blocking({"host_to_device": "ok", "device_to_host": "ok"}) == "ok"
    summary = foreach_checks.summarize_non_blocking({"host_to_device": "ok", "device_to_host": "wrong: tensor 1"})
    assert summary == "device_to_host wrong: tensor 1"
    assert foreach_checks.summarize_non_blocking({"error": "could not run: x"}) == "error could not run: x"
