"""Where a repro runs: the GPUs it may take (idle ones, unless forced; never a live server's) and the
environment its children get. Indices are nvidia-smi's (PCI bus order), which children are told to use.
"""
import os

from probes.graphrepro import gpus


def child_env(visible=None):
    """Children number GPUs as nvidia-smi does (PCI bus order), whatever CUDA's default order would be."""
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def idle_devices(ctx):
    """{"devices", "source", "why"}: a GPU list that says memory use / processes per GPU: env's, else
    nvidia-smi's asked here; devices None (torch's memory query then) when neither can say."""
    env_gpus = (ctx.results.get("env") or {}).get("gpus") or {}
    devices = env_gpus.get("devices") or []
    if gpus.idle_state_known(devices):
        return {"devices": devices, "source": "env", "why": None}
    why = "the env probe gave no GPU list" if not devices else "the env probe's GPU list has no memory use"
    own, error = gpus.devices_from_smi(min(gpus.SMI_TIMEOUT, max(1.0, ctx.time_left() / 4)))
    if gpus.idle_state_known(own):
        return {"devices": own, "source": "nvidia-smi", "why": why}
    return {"devices": None, "source": None, "why": "%s; nvidia-smi: %s" % (why, error or "no memory use")}


def pick_gpus(ctx, info, idle, settings, force, notes):
    """(chosen indices, None) or (None, why): idle GPUs only unless --force; a live server's never.
    Without any idle-state source the repro refuses unless forced."""
    servers = (ctx.results.get("deployment") or {}).get("servers") or []
    devices = idle["devices"]
    if devices is None and info.get("memory_error") is None and all(
            d.get("memory_used_mib") is not None for d in info["devices"]):
        devices = info["devices"]
        notes.append("GPU idle state from torch.cuda.mem_get_info (%s); other processes are not listed"
                     % idle["why"])
    elif idle["source"] == "nvidia-smi":
        notes.append("GPU idle state from nvidia-smi here (%s)" % idle["why"])
    indices = [d.get("index") for d in devices or info["devices"]]
    # torch's UUIDs (same PCI order) fill in when the GPU list has none, for CUDA_VISIBLE_DEVICES=GPU-….
    uuids = dict(gpus.uuid_index(info["devices"]), **gpus.uuid_index(devices))
    reasons = gpus.busy_reasons(devices or [], servers, indices, uuids)
    protected = gpus.protected_gpus(servers, uuids, indices)
    if devices is None:
        unknown = "cannot tell whether the GPUs are idle (%s; torch: %s)" % (
            idle["why"], info.get("memory_error") or "no memory use")
        if not force:
            return None, unknown + "; pass --force to run anyway"
        notes.append(unknown + "; --force given: running anyway")
    chosen, why = gpus.select_gpus(indices, reasons, int(settings.get("tp", 1)), force, protected)
    if chosen and any(i in reasons for i in chosen):
        notes.append("forced onto busy GPU(s): " + ", ".join("GPU%d (%s)" % (i, reasons[i]) for i in chosen
                                                              if i in reasons))
    return chosen, why
