"""Which GPUs the cuda_graph probe takes, and how it refuses: idle state from env, nvidia-smi or torch;
live servers named by index or GPU-uuid; children numbered in nvidia-smi's (PCI bus) order."""
import copy
import os
import stat

from probes import cuda_graph
from probes.context import ProbeContext
from probes import gpu_layer as gpus

UUID0, UUID1 = "GPU-0a1b2c3d-1111-2222-3333-444455556666", "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"


class FakeWorker(object):
    """Stands in for the info child: answers device_info with the devices it is given."""
    calls, envs = [], []
    devices, memory_error = [], None

    def __init__(self, modules=None, env=None, python=None):
        FakeWorker.envs.append(env)

    def call(self, handler, args, timeout):
        FakeWorker.calls.append((handler, dict(args)))
        devices = copy.deepcopy(FakeWorker.devices)
        info = {"status": "ok", "torch": "2.13.0", "cuda": "12.8", "cuda_available": True, "devices": devices}
        if args.get("memory"):
            info["memory_error"] = FakeWorker.memory_error
            if FakeWorker.memory_error:
                for device in devices:
                    device.pop("memory_used_mib", None)
        else:
            for device in devices:
                device.pop("memory_used_mib", None)
        return info

    def close(self):
        pass

    def remove_logs(self):
        pass


def torch_devices(*used_mib):
    return [{"index": i, "name": "NVIDIA H200", "compute_capability": "sm_90", "uuid": (UUID0, UUID1)[i],
             "memory_total_mib": 143771, "memory_used_mib": used} for i, used in enumerate(used_mib)]


def run_collect(monkeypatch, results=None, options=None, smi=(None, "nvidia-smi not found on PATH")):
    FakeWorker.calls, FakeWorker.envs = [], []
    ran = []
    monkeypatch.setattr(cuda_graph, "Worker", FakeWorker)
    monkeypatch.setattr(cuda_graph, "run_synthetic", lambda ctx, settings, data, env, *rest: ran.append(env))
    if smi is not None:
        monkeypatch.setattr(gpus, "query", lambda timeout: smi)
    opts = dict({"mode": "synthetic", "algorithms": ["DFLASH"], "batch_sizes": [1], "draft_tokens": [2, 2]},
                **(options or {}))
    data = cuda_graph.collect(ProbeContext(options={"cuda_graph": opts}, results=results or {}))
    return data, ran


def test_without_any_idle_state_the_repro_refuses_unless_forced(monkeypatch):
    FakeWorker.devices, FakeWorker.memory_error = torch_devices(0, 0), None
    data, ran = run_collect(monkeypatch)
    assert ran == [] and FakeWorker.calls[0][1] == {"memory": False}
    assert data["skip_reason"].startswith("cannot tell whether the GPUs are idle (the env probe gave no")
    assert "nvidia-smi not found" in data["skip_reason"]
    assert data["skip_reason"].endswith("pass --force to run anyway")
    assert all(c["status"] == "skipped" for c in data["cells"])
    data, ran = run_collect(monkeypatch, options={"force": True})
    assert len(ran) == 1 and ran[0]["CUDA_VISIBLE_DEVICES"] == "0"
    assert any("--force given: running anyway" in n for n in data["notes"])


def test_torch_memory_use_is_no_idle_state_an_unlisted_process_counts_as_busy(monkeypatch):
    """torch's free memory cannot list other processes: without nvidia-smi's list no GPU counts as idle."""
    FakeWorker.devices, FakeWorker.memory_error = torch_devices(30000, 420), None
    data, ran = run_collect(monkeypatch)
    assert ran == [] and "pass --force" in data["skip_reason"]
    env = {"gpus": {"status": "ok", "source": "nvidia-smi", "devices": [
        {"index": 0, "uuid": UUID0, "memory_used_mib": 2, "processes": None},
        {"index": 1, "uuid": UUID1, "memory_used_mib": 2, "processes": []}]}}
    data, ran = run_collect(monkeypatch, results={"env": env}, options={"tp": 2})
    assert ran == [] and "GPU0: its compute processes cannot be listed: counted as busy" in data["skip_reason"]


def test_children_number_gpus_in_pci_bus_order(monkeypatch):
    """nvidia-smi's indices are PCI bus order; CUDA's default (fastest first) may differ."""
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")
    FakeWorker.devices, FakeWorker.memory_error = torch_devices(300, 300), None
    env = {"gpus": {"status": "ok", "source": "nvidia-smi",
                    "devices": [{"index": 0, "uuid": UUID0, "memory_used_mib": 2, "processes": []},
                                {"index": 1, "uuid": UUID1, "memory_used_mib": 2, "processes": []}]}}
    data, ran = run_collect(monkeypatch, results={"env": env})
    assert FakeWorker.calls[0][1] == {"memory": False}   # env's list suffices: no context on every GPU
    assert FakeWorker.envs[0]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"   # the info child too
    assert ran[0]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and ran[0]["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_server_on_uuid_visible_devices_is_never_used_even_forced(monkeypatch):
    FakeWorker.devices, FakeWorker.memory_error = torch_devices(0, 0), None
    env = {"gpus": {"status": "ok", "source": "nvidia-smi",
                    "devices": [{"index": 0, "uuid": UUID0, "memory_used_mib": 2, "processes": []},
                                {"index": 1, "uuid": UUID1, "memory_used_mib": 2, "processes": None}]}}
    deployment = {"servers": [{"pid": 4242, "cuda_visible_devices": UUID1, "args": {"tp_size": 1}}]}
    data, ran = run_collect(monkeypatch, results={"env": env, "deployment": deployment},
                            options={"tp": 2, "force": True})
    assert ran == [] and "GPU1" in data["skip_reason"] and "never used" in data["skip_reason"]
    data, ran = run_collect(monkeypatch, results={"env": env, "deployment": deployment}, options={"tp": 2})
    assert "GPU1: serving sglang (pid 4242): never touched, not even with --force" in data["skip_reason"]
    data, ran = run_collect(monkeypatch, results={"env": env, "deployment": deployment}, options={"force": True})
    assert ran[0]["CUDA_VISIBLE_DEVICES"] == "0"


def test_server_gpus_map_uuids_and_prefixes_and_protect_everything_when_unmappable():
    uuids = {UUID0: 0, UUID1: 1}
    tp2 = {"tp_size": 2}
    assert gpus.server_gpus({"cuda_visible_devices": "%s,%s" % (UUID1, UUID0), "args": tp2}, uuids) == [1, 0]
    assert gpus.server_gpus({"cuda_visible_devices": "GPU-9F8E7D6C"}, uuids) == [1]   # CUDA takes a prefix
    assert gpus.server_gpus({"cuda_visible_devices": "1, 0", "args": tp2}, uuids) == [1, 0]
    assert gpus.server_gpus({"cuda_visible_devices": "GPU-"}, uuids) is None   # ambiguous prefix
    mig = {"pid": 9, "cuda_visible_devices": "MIG-5c1e7a2b-0000-1111-2222-333344445555"}
    assert gpus.server_gpus(mig, uuids) is None
    assert gpus.protected_gpus([mig], uuids, [0, 1, 2]) == {0, 1, 2}
    reasons = gpus.busy_reasons([], [mig], [0, 1])
    assert sorted(reasons) == [0, 1] and "not matched to a GPU index" in reasons[0] and gpus.NEVER in reasons[0]
    assert gpus.select_gpus([0, 1, 2], reasons, 1, True, {0, 1}) == ([2], None)


NVIDIA_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=*) printf '0, NVIDIA H200, %s, 00000000:19:00.0, 143771, 61234, 97, 570.86.15, 9.0\\n'\
 '%s'; printf '1, NVIDIA H200, %s, 00000000:3B:00.0, 143771, 1, 0, 570.86.15, 9.0\\n' '%s' ;;
  --query-compute-apps=*) printf '%s, 3141, python3, 61000\\n' '%s' ;;
  *) exit 9 ;;
esac
"""


def test_nvidia_smi_is_asked_here_when_the_env_probe_did_not_run(monkeypatch, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(NVIDIA_SMI % (UUID0, UUID0, UUID1, UUID1, UUID0, UUID0))
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", "%s%s%s" % (tmp_path, os.pathsep, os.environ.get("PATH", "")))
    devices, error = gpus.query()
    assert error is None and [d["index"] for d in devices] == [0, 1]
    assert devices[0]["processes"] == [{"pid": 3141, "name": "python3", "used_memory_mib": 61000}]
    assert devices[1]["processes"] == []
    FakeWorker.devices, FakeWorker.memory_error = torch_devices(0, 0), None
    data, ran = run_collect(monkeypatch, smi=None)
    assert FakeWorker.calls[0][1] == {"memory": False}
    assert ran[0]["CUDA_VISIBLE_DEVICES"] == "1"
    assert any("GPU idle state from nvidia-smi here" in n for n in data["notes"])
