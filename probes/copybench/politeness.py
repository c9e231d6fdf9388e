"""Is a GPU idle enough to benchmark on? nvidia-smi's view (read by the probe, which holds no CUDA context)
and torch's free-memory view (read in the child), decided by one pure verdict.
"""
from probes.context import run_command, which
from probes.hostinfo import nvidia_smi

CSV = "--format=csv,noheader,nounits"
# The idle check needs no compute capability: leaving it out keeps drivers before R510 (which reject the
# field) on nvidia-smi's view, the one that sees small foreign processes.
GPU_QUERY = ["--query-gpu=" + ",".join(nvidia_smi.LEGACY_QUERY_GPU_FIELDS), CSV]
APPS_QUERY = ["--query-compute-apps=" + ",".join(nvidia_smi.COMPUTE_APPS_FIELDS), CSV]
# A fresh CUDA context and the allocator's first block, counted in torch's used-memory figure.
OWN_CONTEXT_MIB = 1024


def normalize_uuid(uuid):
    text = str(uuid or "").strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def snapshot_from_text(gpu_text, apps_text):
    """{gpus, apps} from the two nvidia-smi answers, or {error} when either is an error message."""
    try:
        return {"gpus": nvidia_smi.parse_query_gpu(gpu_text, nvidia_smi.LEGACY_QUERY_GPU_FIELDS),
                "apps": nvidia_smi.parse_compute_apps(apps_text)}
    except nvidia_smi.NvidiaSmiError as exc:
        return {"error": "nvidia-smi: %s" % exc}


def smi_snapshot(timeout=10.0):
    """{gpus, apps} from nvidia-smi, or {error} when it cannot be asked (then torch's view decides)."""
    binary = which("nvidia-smi")
    if not binary:
        return {"error": "nvidia-smi: not found"}
    texts = []
    for args in (GPU_QUERY, APPS_QUERY):
        result = run_command([binary] + args, timeout=timeout)
        if not result["ok"]:
            message = nvidia_smi.failure_message(result["stdout"]) or result["error"]
            return {"error": "nvidia-smi: %s" % message}
        texts.append(result["stdout"])
    return snapshot_from_text(*texts)


def idle_verdict(uuid, snapshot, max_used_mib, torch_used_mib=None, own_pids=()):
    """(idle, reason, source) for the GPU with this UUID.

    nvidia-smi decides when it knows the GPU: no compute process but the probe's own (the runner may hold a
    context from an earlier probe) and at most max_used_mib in use besides theirs. Otherwise torch's
    figure decides, allowing for the probe's own context.
    """
    key = normalize_uuid(uuid)
    entry = None
    for gpu in (snapshot or {}).get("gpus") or []:
        if key and normalize_uuid(gpu.get("uuid")) == key:
            entry = gpu
    if entry is not None:
        on_gpu = [a for a in snapshot.get("apps") or [] if normalize_uuid(a.get("gpu_uuid")) == key]
        others = [a for a in on_gpu if a.get("pid") not in own_pids]
        if others:
            listed = ", ".join("pid %s (%s, %s MiB)" % (a["pid"], a["name"], a["used_memory_mib"])
                               for a in others[:4])
            return False, "%d other process(es) on the GPU: %s" % (len(others), listed), "nvidia-smi"
        ours = sum(a.get("used_memory_mib") or 0 for a in on_gpu)
        used = max(0, (entry.get("memory_used_mib") or 0) - ours)
        if used > max_used_mib:
            return False, "%d MiB already in use (idle limit %d MiB)" % (used, max_used_mib), "nvidia-smi"
        return True, "idle: no other compute process, %d MiB in use" % used, "nvidia-smi"
    if torch_used_mib is None:
        return False, "cannot tell whether the GPU is idle (no nvidia-smi, no memory figure)", "none"
    limit = max_used_mib + OWN_CONTEXT_MIB
    if torch_used_mib > limit:
        return (False, "%d MiB in use with this probe's context (limit %d MiB)" % (torch_used_mib, limit),
                "torch.cuda.mem_get_info")
    return True, "idle by torch.cuda.mem_get_info: %d MiB in use" % torch_used_mib, "torch.cuda.mem_get_info"
