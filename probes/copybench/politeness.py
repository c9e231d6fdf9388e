"""Is a GPU idle enough to benchmark on? nvidia-smi's view (read by the probe, which holds no CUDA context)
and torch's free-memory view (read in the child), with pure parsers and one pure verdict.
"""
from probes.context import run_command, which

GPU_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total",
             "--format=csv,noheader,nounits"]
APPS_QUERY = ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
              "--format=csv,noheader,nounits"]
# A fresh CUDA context and the allocator's first block, counted in torch's used-memory figure.
OWN_CONTEXT_MIB = 1024


def _number(text):
    try:
        return int(float(text.strip()))
    except (TypeError, ValueError):
        return None


def normalize_uuid(uuid):
    text = str(uuid or "").strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def parse_gpu_query(text):
    """nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total (csv, no header, no units)."""
    gpus = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or _number(parts[0]) is None:
            continue
        gpus.append({"index": _number(parts[0]), "uuid": parts[1], "name": ",".join(parts[2:-2]).strip(),
                     "memory_used_mib": _number(parts[-2]), "memory_total_mib": _number(parts[-1])})
    return gpus


def parse_compute_apps(text):
    """nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory; 'No running …' lines skipped."""
    apps = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or _number(parts[1]) is None:
            continue
        apps.append({"gpu_uuid": parts[0], "pid": _number(parts[1]), "name": ",".join(parts[2:-1]).strip(),
                     "used_memory_mib": _number(parts[-1])})
    return apps


def smi_snapshot(timeout=10.0):
    """{gpus, apps} from nvidia-smi, or {error} when it cannot be asked (then torch's view decides)."""
    if not which("nvidia-smi"):
        return {"error": "nvidia-smi: not found"}
    gpus = run_command(GPU_QUERY, timeout=timeout)
    if not gpus["ok"]:
        return {"error": gpus["error"]}
    apps = run_command(APPS_QUERY, timeout=timeout)
    if not apps["ok"]:
        return {"error": apps["error"]}
    return {"gpus": parse_gpu_query(gpus["stdout"]), "apps": parse_compute_apps(apps["stdout"])}


def idle_verdict(uuid, snapshot, max_used_mib, torch_used_mib=None, own_pid=None):
    """(idle, reason, source) for the GPU with this UUID.

    nvidia-smi decides when it knows the GPU: no other compute process and at most max_used_mib in use.
    Otherwise torch's figure decides, allowing for the probe's own context.
    """
    key = normalize_uuid(uuid)
    entry = None
    for gpu in (snapshot or {}).get("gpus") or []:
        if key and normalize_uuid(gpu.get("uuid")) == key:
            entry = gpu
    if entry is not None:
        others = [a for a in snapshot.get("apps") or []
                  if normalize_uuid(a.get("gpu_uuid")) == key and a.get("pid") != own_pid]
        if others:
            listed = ", ".join("pid %s (%s, %s MiB)" % (a["pid"], a["name"], a["used_memory_mib"])
                               for a in others[:4])
            return False, "%d other process(es) on the GPU: %s" % (len(others), listed), "nvidia-smi"
        used = entry.get("memory_used_mib") or 0
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
