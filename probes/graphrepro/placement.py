"""Where a repro runs: the GPUs it may take, by the one GPU policy (probes/gpu_layer.py), and the environment
its children get. Indices are nvidia-smi's (PCI bus order), which children are told to use.
"""
import os

from probes import gpu_layer


def child_env(visible=None):
    """Children number GPUs as nvidia-smi does (PCI bus order), whatever CUDA's default order would be."""
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def idle_devices(ctx):
    """{"devices", "source", "why"}: the GPU list with memory use and compute processes (env's, else
    nvidia-smi's asked here); devices None when neither can say."""
    return gpu_layer.snapshot(ctx)


def pick_gpus(ctx, info, idle, settings, force, notes):
    """(chosen indices, None) or (None, why): idle GPUs only unless --force; a live server's never.
    Without nvidia-smi's process list no GPU counts as idle: the repro refuses unless forced."""
    servers = (ctx.results.get("deployment") or {}).get("servers") or []
    devices = idle["devices"]
    if idle["source"] == "nvidia-smi":
        notes.append("GPU idle state from nvidia-smi here (%s)" % idle["why"])
    if devices is None:
        # torch's devices, without a process list: each counts as busy (--force may still take it).
        devices = [dict(d, processes=None) for d in info["devices"]]
        unknown = "cannot tell whether the GPUs are idle (%s)" % idle["why"]
        if not force:
            return None, unknown + "; pass --force to run anyway"
        notes.append(unknown + "; --force given: running anyway")
    indices = [d.get("index") for d in devices]
    # torch's UUIDs (same PCI order) fill in when the GPU list has none, for CUDA_VISIBLE_DEVICES=GPU-….
    uuids = dict(gpu_layer.uuid_index(info["devices"]), **gpu_layer.uuid_index(devices))
    limit = int(settings.get("busy_memory_mib", gpu_layer.BUSY_MEMORY_MIB))  # the one threshold (gpu_layer)
    reasons = gpu_layer.busy_reasons(devices, servers, indices, uuids, limit)
    protected = gpu_layer.protected_gpus(servers, uuids, indices)
    chosen, why = gpu_layer.select_gpus(indices, reasons, int(settings.get("tp", 1)), force, protected)
    if chosen and any(i in reasons for i in chosen):
        notes.append("forced onto busy GPU(s): " + ", ".join("GPU%d (%s)" % (i, reasons[i]) for i in chosen
                                                              if i in reasons))
    return chosen, why
