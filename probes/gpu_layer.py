"""The one probe-side GPU layer: which GPUs there are, which of them a probe may touch, and how a server's
CUDA_VISIBLE_DEVICES maps onto them. Used by torch_caps, copy_bench and cuda_graph alike.

- One nvidia-smi query (env's, or asked here with env's command timeout and its old-driver fallback).
- One policy: idle means no compute process and memory use under a threshold; a process list that cannot be
  read counts as busy; a live sglang server's GPUs are never touched, not even with --force; --force
  overrides only "busy with something else".
- One mapping of CUDA_VISIBLE_DEVICES entries (indices, GPU-uuids and their unique prefixes) to nvidia-smi's
  indices (PCI bus order), and the same reason strings everywhere.
- A live server holds the GPUs sglang gives it: tp x pp x dp ordinals from --base-gpu-id with --gpu-id-step,
  inside its CUDA_VISIBLE_DEVICES and a container's NVIDIA_VISIBLE_DEVICES. An index in
  NVIDIA_VISIBLE_DEVICES is read as the host's (what the container runtime was given); a uuid is matched.
"""
from probes.context import which
from probes.hostinfo import gpus as smi_gpus
from probes.optionspec import Option

BUSY_MEMORY_MIB = 1024   # more than this in use means someone is on the GPU
# The one busy threshold, declared here once; every GPU probe lists this option (`--set PROBE.busy_memory_mib=N`).
BUSY_OPTION = Option("busy_memory_mib", "int", BUSY_MEMORY_MIB,
                     "A GPU using more memory than this (MiB) counts as busy.", minimum=0)
DEFAULT_SMI_TIMEOUT = 10.0   # env's command_timeout default
FORCE_HINT = "pass --force to use busy GPUs"
NEVER = "never touched, not even with --force"


# -- the query -------------------------------------------------------------------------------------------
def query(timeout=DEFAULT_SMI_TIMEOUT):
    """(devices, None) from nvidia-smi: each with `processes` (None when they cannot be listed), or (None, why)."""
    binary = which("nvidia-smi")
    if binary is None:
        return None, "nvidia-smi not found on PATH"
    devices, error, _ = smi_gpus.query_gpus(binary, timeout)
    if error is not None:
        return None, error
    block = {"devices": devices}
    smi_gpus.attach_processes(binary, timeout, block)
    return devices, None


def snapshot_here(timeout=DEFAULT_SMI_TIMEOUT):
    """The snapshot shape from nvidia-smi asked here (no earlier probe results)."""
    devices, error = query(timeout)
    return {"devices": devices or None, "source": "nvidia-smi" if devices else None,
            "why": None if devices else "nvidia-smi: %s" % (error or "no GPU listed")}


def snapshot(ctx):
    """{devices, source, why}: env's GPU list when it came from nvidia-smi, else one asked here with env's
    command timeout; devices None when neither can say."""
    env_gpus = (ctx.results.get("env") or {}).get("gpus") or {}
    if env_gpus.get("status") == "ok" and env_gpus.get("source") == "nvidia-smi" and env_gpus.get("devices"):
        return {"devices": env_gpus["devices"], "source": "env", "why": None}
    why = "the env probe gave no nvidia-smi GPU list" if not env_gpus else (
        "the env probe's GPU list: %s" % (env_gpus.get("reason") or env_gpus.get("source") or "empty"))
    if env_gpus.get("source") == "nvidia-smi" and env_gpus.get("status") != "ok":
        # env's nvidia-smi failed or hung: asking again would fail the same way, after the same wait.
        return {"devices": None, "source": None, "why": why}
    timeout = float((ctx.option("env", {}) or {}).get("command_timeout", DEFAULT_SMI_TIMEOUT))
    devices, error = query(max(0.5, min(timeout, ctx.time_left() / 4)))
    if devices:
        return {"devices": devices, "source": "nvidia-smi", "why": why}
    return {"devices": None, "source": None, "why": "%s; nvidia-smi: %s" % (why, error or "no GPU listed")}


# -- the mapping -----------------------------------------------------------------------------------------
def normalize_uuid(uuid):
    text = str(uuid or "").strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def uuid_index(devices):
    """{'GPU-…' uuid: nvidia-smi index} from a GPU list."""
    return {str(d["uuid"]): d["index"] for d in devices or [] if d.get("uuid") and d.get("index") is not None}


def visible_index(part, uuids):
    """One CUDA_VISIBLE_DEVICES entry -> index, or None. CUDA takes a unique UUID prefix too."""
    part = part.strip()
    if part.isdigit():
        return int(part)
    if not part.upper().startswith("GPU-"):
        return None  # MIG-… or garbage
    key = normalize_uuid(part)
    found = [i for u, i in uuids.items() if normalize_uuid(u).startswith(key)]
    return found[0] if len(found) == 1 else None


def _whole(args, keys, default, least):
    """An integer flag under any of its spellings (typed, or raw text as the command line gave it)."""
    for key in keys:
        value = args.get(key)
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = int(str(value).strip())
        except ValueError:
            continue
        return max(number, least)
    return default


def sglang_ordinals(args):
    """The device ordinals, in the server's own CUDA-visible numbering, that sglang gives its scheduler processes
    (sglang 0.5.23 srt/entrypoints/engine.py and srt/managers/data_parallel_controller.py): for each DP rank
    (a single one when attention is data-parallel inside the TP group), each PP rank and TP rank on this node,
    base_gpu_id + dp_rank * tp * pp * gpu_id_step + pp_rank * tp_per_node + tp_rank * gpu_id_step."""
    tp = _whole(args, ("tp_size", "tensor_parallel_size"), 1, 1)
    pp = _whole(args, ("pp_size", "pipeline_parallel_size"), 1, 1)
    dp = _whole(args, ("dp_size", "data_parallel_size"), 1, 1)
    nnodes = _whole(args, ("nnodes",), 1, 1)
    base = _whole(args, ("base_gpu_id",), 0, 0)
    step = _whole(args, ("gpu_id_step",), 1, 1)
    attention_dp = args.get("enable_dp_attention") is True or _whole(
        args, ("attn_dp_size", "attention_data_parallel_size"), 1, 1) > 1
    tp_node, pp_node = max(tp // nnodes, 1), max(pp // nnodes, 1)
    found = set()
    for dp_rank in range(1 if attention_dp else dp):
        for pp_rank in range(pp_node):
            for tp_rank in range(tp_node):
                found.add(base + dp_rank * tp * pp * step + pp_rank * tp_node + tp_rank * step)
    return sorted(found)


def _entries(value):
    """A *_VISIBLE_DEVICES value as its entries; None when it does not narrow (unset, empty, `all`)."""
    text = str(value or "").strip()
    if not text or text.lower() == "all":
        return None
    if text.lower() in ("none", "void"):
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def server_gpus(server, uuids=None):
    """GPU indices (nvidia-smi's) a live server occupies, counted as sglang counts them (sglang_ordinals),
    each ordinal taken through the server's CUDA_VISIBLE_DEVICES and, in a container, its
    NVIDIA_VISIBLE_DEVICES (the container's GPUs, host indices or GPU-uuids: a uuid is mapped to the host's
    index through nvidia-smi's list). None when an entry cannot be mapped to a GPU index."""
    uuids = uuids or {}
    env = server.get("env") if isinstance(server.get("env"), dict) else {}
    visible = server.get("cuda_visible_devices")
    cuda = _entries(visible if visible is not None else env.get("CUDA_VISIBLE_DEVICES"))
    container = _entries(env.get("NVIDIA_VISIBLE_DEVICES"))
    out = []
    for ordinal in sglang_ordinals(server.get("args") or {}):
        entry = str(ordinal)
        if cuda is not None:
            if ordinal >= len(cuda):
                return None
            entry = cuda[ordinal]
        if container is not None and entry.isdigit():   # an index among the container's GPUs
            if int(entry) >= len(container):
                return None
            entry = container[int(entry)]
        index = visible_index(entry, uuids)
        if index is None:
            return None
        if index not in out:
            out.append(index)
    return out


def protected_gpus(servers, uuids=None, all_indices=()):
    """GPUs of live sglang servers: never used, not even with --force (all of them when unmappable)."""
    out = set()
    for server in servers or []:
        occupied = server_gpus(server, uuids)
        out.update(all_indices if occupied is None else occupied)
    return out


# -- the policy ------------------------------------------------------------------------------------------
def server_reason(server, mapped=True):
    port = (server.get("args") or {}).get("port")
    where = "pid %s%s" % (server.get("pid"), ", port %s" % port if port else "")
    if mapped:
        return "serving sglang (%s): %s" % (where, NEVER)
    return "serving sglang (%s) on CUDA_VISIBLE_DEVICES=%s, not matched to a GPU index: every GPU counts as its, " \
           "%s" % (where, server.get("cuda_visible_devices"), NEVER)


def busy_reason(device, limit=BUSY_MEMORY_MIB, own_pids=()):
    """Why a GPU is busy with something else, or None when it is idle."""
    processes = device.get("processes")
    if processes is None:
        return "its compute processes cannot be listed: counted as busy"
    others = [p for p in processes if p.get("pid") not in own_pids]
    if others:
        return "%d compute process(es): %s" % (len(others), ", ".join(
            "%s (pid %s)" % (p.get("name") or "?", p.get("pid")) for p in others[:3]))
    used = device.get("memory_used_mib")
    if used is not None and used > limit:
        return "%s MiB in use (idle limit %d MiB)" % (used, limit)
    return None


def busy_reasons(devices, servers, all_indices=(), uuids=None, limit=BUSY_MEMORY_MIB):
    """{gpu index: why it may not be used freely}: busy with something else, or a live server's."""
    reasons = {}
    for device in devices or []:
        why = busy_reason(device, limit)
        if why:
            reasons[device.get("index")] = why
    uuids = uuid_index(devices) if uuids is None else uuids
    indices = list(all_indices) or [d.get("index") for d in devices or []]
    for server in servers or []:
        occupied = server_gpus(server, uuids)
        for index in (indices if occupied is None else occupied):
            reasons[index] = server_reason(server, occupied is not None)
    return reasons


def verdicts(devices, servers, force=False, limit=BUSY_MEMORY_MIB):
    """{normalized uuid: {index, use, kind: idle|busy|server, reason, forced}} for every listed GPU."""
    uuids = uuid_index(devices)
    indices = [d.get("index") for d in devices or []]
    protected = protected_gpus(servers, uuids, indices)
    server_why = {}
    for server in servers or []:
        occupied = server_gpus(server, uuids)
        for index in (indices if occupied is None else occupied):
            server_why.setdefault(index, server_reason(server, occupied is not None))
    out = {}
    for device in devices or []:
        index = device.get("index")
        if index in protected:
            entry = {"use": False, "kind": "server", "reason": server_why.get(index, NEVER)}
        else:
            why = busy_reason(device, limit)
            if why is None:
                entry = {"use": True, "kind": "idle", "reason": "idle"}
            else:
                entry = {"use": bool(force), "kind": "busy", "reason": why, "forced": bool(force)}
        out[normalize_uuid(device.get("uuid"))] = dict(entry, index=index)
    return out


def verdict_for(table, uuid, known=True):
    """The verdict of one device by its uuid; a device the GPU list does not show counts as busy."""
    found = (table or {}).get(normalize_uuid(uuid))
    if found is not None:
        return found
    why = "not in nvidia-smi's GPU list (uuid %s): counted as busy" % (uuid or "unknown")
    return {"use": False, "kind": "busy", "reason": why, "index": None} if known else None


def refusal(verdict):
    """The one-line reason a probe gives for leaving a GPU alone."""
    if verdict["kind"] == "server":
        return verdict["reason"]
    return "busy: %s; %s" % (verdict["reason"], FORCE_HINT)


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
    return None, "needs %d idle GPU(s), %d idle; busy: %s (%s)" % (count, len(idle), busy, FORCE_HINT)
