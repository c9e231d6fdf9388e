"""Which GPUs a repro may use: idle ones only, unless forced; never the GPUs of a live server.

Indices here are nvidia-smi's (PCI bus order); children get CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA agrees.
"""
from probes.context import run_command, which
from probes.hostinfo import nvidia_smi

BUSY_MEMORY_MIB = 1024   # more than this in use means someone is on the GPU
SMI_TIMEOUT = 20.0


def busy_reasons(devices, servers, all_indices=(), uuids=None):
    """{gpu index: why it is busy} from the GPU list (env's, or this probe's own) and the live servers.
    `uuids` ({uuid: index}, default from `devices`) maps a server's CUDA_VISIBLE_DEVICES=GPU-…."""
    reasons = {}
    for device in devices or []:
        index = device.get("index")
        procs = device.get("processes") or []
        if procs:
            reasons[index] = "processes %s" % ", ".join(
                "%s (pid %s)" % (p.get("name") or "?", p.get("pid")) for p in procs[:3])
        elif (device.get("memory_used_mib") or 0) > BUSY_MEMORY_MIB:
            reasons[index] = "%s MiB in use" % device.get("memory_used_mib")
    uuids = uuid_index(devices) if uuids is None else uuids
    indices = list(all_indices) or [d.get("index") for d in devices or []]
    for server in servers or []:
        pid = server.get("pid")
        occupied = server_gpus(server, uuids)
        if occupied is None:  # GPUs named in a form we cannot map: every GPU may be one of them
            why = "serving sglang (pid %s) on CUDA_VISIBLE_DEVICES=%s, not matched to a GPU index" % (
                pid, server.get("cuda_visible_devices"))
            occupied = indices
        else:
            why = "serving sglang (pid %s)" % pid
        for index in occupied:
            reasons.setdefault(index, why)
    return reasons


def uuid_index(devices):
    """{'GPU-…' uuid: nvidia-smi index} from a GPU list (env's gpus.devices)."""
    out = {}
    for device in devices or []:
        if device.get("uuid") and device.get("index") is not None:
            out[str(device["uuid"])] = device["index"]
    return out


def _visible_index(part, uuids):
    """One CUDA_VISIBLE_DEVICES entry -> index, or None. CUDA takes a unique UUID prefix too."""
    if part.isdigit():
        return int(part)
    if not part.upper().startswith("GPU-"):
        return None  # MIG-… or garbage
    key = "GPU-" + part[4:].lower()
    found = [i for u, i in uuids.items() if ("GPU-" + u[4:].lower()).startswith(key)]
    return found[0] if len(found) == 1 else None


def server_gpus(server, uuids=None):
    """GPU indices a live server occupies: its CUDA_VISIBLE_DEVICES (indices or GPU-uuids), else
    base id .. base + tp*dp. None when its CUDA_VISIBLE_DEVICES names a GPU we cannot map."""
    visible = server.get("cuda_visible_devices")
    if visible is not None and str(visible).strip():
        out = []
        for part in str(visible).split(","):
            part = part.strip()
            if not part:
                continue
            index = _visible_index(part, uuids or {})
            if index is None:
                return None
            out.append(index)
        return out
    args = server.get("args") or {}
    try:
        base = int(args.get("base_gpu_id") or 0)
        count = int(args.get("tp_size") or 1) * int(args.get("dp_size") or 1)
    except (TypeError, ValueError):
        base, count = 0, 1
    return list(range(base, base + count))


def protected_gpus(servers, uuids=None, all_indices=()):
    """GPUs of live sglang servers: never used, not even with --force (all of them when unmappable)."""
    out = set()
    for server in servers or []:
        occupied = server_gpus(server, uuids)
        out.update(all_indices if occupied is None else occupied)
    return out


def devices_from_smi(timeout=SMI_TIMEOUT):
    """(devices with memory use and processes, None) from nvidia-smi, or (None, why not)."""
    binary = which("nvidia-smi")
    if binary is None:
        return None, "nvidia-smi not found on PATH"
    query = run_command([binary, "--query-gpu=" + ",".join(nvidia_smi.QUERY_GPU_FIELDS),
                         "--format=csv,noheader,nounits"], timeout=timeout)
    if not query["ok"]:
        return None, query["error"] or "nvidia-smi failed"
    apps = run_command([binary, "--query-compute-apps=" + ",".join(nvidia_smi.COMPUTE_APPS_FIELDS),
                        "--format=csv,noheader,nounits"], timeout=timeout)
    try:
        devices = nvidia_smi.parse_query_gpu(query["stdout"])
        processes = nvidia_smi.parse_compute_apps(apps["stdout"]) if apps["ok"] else None
    except nvidia_smi.NvidiaSmiError as exc:
        return None, str(exc)
    return attach_processes(devices, processes), None


def attach_processes(devices, processes):
    """Each device gets its compute processes (None when nvidia-smi could not list them)."""
    for device in devices:
        device["processes"] = None if processes is None else [
            {"pid": p["pid"], "name": p["name"], "used_memory_mib": p["used_memory_mib"]}
            for p in processes if p.get("gpu_uuid") and p["gpu_uuid"] == device.get("uuid")]
    return devices


def idle_state_known(devices):
    """True when every device says how much memory is in use or which processes it runs."""
    return bool(devices) and all(d.get("memory_used_mib") is not None or d.get("processes") is not None
                                 for d in devices)


def select_gpus(indices, reasons, count, force, protected=()):
    """(chosen indices, None) or (None, why not). Idle GPUs first; busy ones only with force; a live
    server's GPUs never."""
    indices = sorted(indices)
    idle = [i for i in indices if i not in reasons]
    if len(idle) >= count:
        return idle[:count], None
    usable = [i for i in indices if i in reasons and i not in protected]
    if force and len(idle) + len(usable) >= count:
        return (idle + usable)[:count], None
    if len(indices) < count:
        return None, "needs %d GPU(s), the host has %d" % (count, len(indices))
    if force:
        return None, "needs %d GPU(s) besides those of live sglang servers (%s), which are never used" % (
            count, ", ".join("GPU%d" % i for i in sorted(protected)))
    busy = "; ".join("GPU%s: %s" % (i, reasons[i]) for i in indices if i in reasons)
    return None, "needs %d idle GPU(s), %d idle; busy: %s (pass --force to use busy GPUs)" % (
        count, len(idle), busy)
