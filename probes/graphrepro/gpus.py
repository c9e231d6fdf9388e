"""Which GPUs a repro may use: idle ones only, unless forced; never the GPUs of a live server."""

BUSY_MEMORY_MIB = 1024   # more than this in use means someone is on the GPU


def busy_reasons(devices, servers):
    """{gpu index: why it is busy} from env's GPU list and deployment's live servers."""
    reasons = {}
    for device in devices or []:
        index = device.get("index")
        procs = device.get("processes") or []
        if procs:
            reasons[index] = "processes %s" % ", ".join(
                "%s (pid %s)" % (p.get("name") or "?", p.get("pid")) for p in procs[:3])
        elif (device.get("memory_used_mib") or 0) > BUSY_MEMORY_MIB:
            reasons[index] = "%s MiB in use" % device.get("memory_used_mib")
    for server in servers or []:
        pid = server.get("pid")
        for index in server_gpus(server):
            reasons.setdefault(index, "serving sglang (pid %s)" % pid)
    return reasons


def server_gpus(server):
    """GPU indices a live server occupies: its CUDA_VISIBLE_DEVICES, else base id .. base + tp*dp."""
    visible = server.get("cuda_visible_devices")
    if visible:
        out = []
        for part in str(visible).split(","):
            part = part.strip()
            if part.isdigit():
                out.append(int(part))
        return out
    args = server.get("args") or {}
    try:
        base = int(args.get("base_gpu_id") or 0)
        count = int(args.get("tp_size") or 1) * int(args.get("dp_size") or 1)
    except (TypeError, ValueError):
        base, count = 0, 1
    return list(range(base, base + count))


def protected_gpus(servers):
    """GPUs of live sglang servers: never used, not even with --force."""
    out = set()
    for server in servers or []:
        out.update(server_gpus(server))
    return out


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
