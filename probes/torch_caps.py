"""What this torch can do for sglang's grouped input copies, verified by running them, never by version.

For CPU and each idle CUDA device: `torch._foreach_copy_` over lists of small tensors per dtype pair,
one call mixing pairs, non-contiguous sources, mismatched shapes. Without `_foreach_copy_` the pairs are
checked through the per-tensor `copy_` loop sglang falls back to. `paths` says, per list kind, whether
the call ran the fused multi-tensor kernel or fell back to a copy per tensor (torch.profiler on CUDA).

The checks run in the run's one torch child under the host's chosen interpreter (--python, else the live server's, else the
probing Python), so they describe the torch that serves; `interpreter` says which Python ran them and why.
Options (`--set torch_caps.KEY=VALUE`): cuda (auto|true|false, default auto: idle GPUs only unless
--force), busy_memory_mib (default 1024), profile (false: no profiler, paths unknown on CUDA),
child_timeout (s, default 120).
"""
from probes import gpu_layer
from probes.context import ProbeContext, Skip
from probes.hostinfo import foreach_path, interpreter, torch_child
from probes.hostinfo.foreach_checks import check_device, fail
from probes.optionspec import Option, settings
from probes.schemas import b, mapping, obj, s

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "light",
    "order": 3,
    "needs": ("deployment",),
    "summary": "torch._foreach_copy_ and the copy paths, checked for each dtype pair",
    "gpu": "optional",
    "torch": "yes",
    "sglang": "no",
    "cost": "light: a few-kilobyte check on idle GPUs, seconds",
}
OPTIONS = (
    Option("cuda", "choice", "auto", "Functional check on GPUs: auto (idle GPUs only), true (every GPU), false.",
           choices=("auto", "true", "false")),
    gpu_layer.BUSY_OPTION,
    Option("child_timeout", "float", 120.0, "Seconds the checks may take under the serving Python.", minimum=1),
    Option("profile", "bool", True, "Profile which kernel each copy path runs on the GPU."),
)
SHAPE = obj({
    "torch_version": s(), "has_foreach_copy": b(), "method": s("foreach_copy | loop"),
    "pair_order": s("pair keys are written src->dst"),
    "interpreter": interpreter.RECORD,
    "checks": mapping(obj({
        "status": s().opt(), "ok": b().null(), "reason": s().opt(),
        "pairs": mapping(s("ok | wrong: … | raises: …"), "src->dst dtype pair → outcome").opt(),
        "mixed_pairs_one_call": s().opt(), "non_contiguous": s().opt(), "mismatched_shapes": s().opt(),
        "non_blocking": s().opt(),
        "paths": mapping(obj({"path": s("fast | per_tensor | unknown"), "how": s().opt()})).opt()}),
        '"cpu" or "cuda:N" → functional checks of torch._foreach_copy_'),
}, "torch._foreach_copy_ present and correct, per device, in the serving interpreter")
NOTES = """
`torch_version, has_foreach_copy, checks:{"cpu"|"cuda:N": {ok, pairs:{"int64->int64": ok|"wrong: ..."|"raises:
..."}, mixed_pairs_one_call: ok|raises, non_contiguous: ok|..., mismatched_shapes: ok|raises}}`. Pair keys are
written `src->dst` (`pair_order` says so). Also `method` (foreach_copy | loop); per device `status`, `method`,
`non_blocking` (CPU: not applicable; CUDA: `ok` or what went wrong in which direction) and on CUDA
`non_blocking_directions{host_to_device, device_to_host}` (pinned host memory ↔ the device); a CUDA device the
GPU policy leaves alone is `{status: skipped, ok: null, reason}` (busy: unless `--force`; a live server's:
always). `interpreter{path, why: default|live_server|explicit, reason, pid?, note?, ran: child}` and
`executable`: the checks always run in a child of the host's chosen interpreter (a failing one makes the probe
`skipped`, naming it); per device `paths{contiguous_same_dtype, non_contiguous, mixed_pairs_one_call: {path:
fast|per_tensor|unknown, how, kernels?, launches?, reason?, source?}}` (CUDA: from the profiler's kernel names;
CPU: always per_tensor).
"""


def collect(ctx):
    """The checks in the run's torch child (probes/hostinfo/torch_child.py, CUDA_DEVICE_ORDER=PCI_BUS_ID) under
    the host's chosen interpreter (the serving one when a server runs)."""
    options = settings(OPTIONS, ctx.option("torch_caps"))
    timeout = min(float(options["child_timeout"]), max(5.0, ctx.time_left() * 0.8))
    chosen = interpreter.target(ctx)
    data, why = torch_child.ask(chosen["path"], ctx.results, "caps", ctx.modules, timeout,
                                {"options": ctx.options, "results": _shared_results(ctx)})
    if why is not None:
        raise Skip("under %s (%s): %s" % (chosen["path"], chosen.get("reason") or chosen["why"], why))
    data["interpreter"] = dict(interpreter.summary(chosen), ran="child")
    return data


def _shared_results(ctx):
    """What the child needs of earlier probes: env's GPU list (idleness without asking nvidia-smi again) and
    the live servers (whose GPUs are never touched)."""
    shared = {}
    gpus = (ctx.results.get("env") or {}).get("gpus")
    if gpus:
        shared["env"] = {"gpus": gpus}
    servers = (ctx.results.get("deployment") or {}).get("servers")
    if servers:
        # the env: a container's NVIDIA_VISIBLE_DEVICES is part of which GPUs the server holds (gpu_layer)
        shared["deployment"] = {"servers": [dict({k: s.get(k) for k in ("pid", "cuda_visible_devices", "args")},
                                                 env={"NVIDIA_VISIBLE_DEVICES": (s.get("env") or {}).get(
                                                     "NVIDIA_VISIBLE_DEVICES")})
                                            for s in servers]}
    return shared


def caps_job(args):
    """In the torch child under the serving Python: the checks."""
    ctx = ProbeContext(options=args.get("options"), results=args.get("results"),
                       deadline=torch_child.deadline(args))
    return collect_here(ctx)


def collect_here(ctx):
    """The checks in this Python."""
    try:
        import torch
    except BaseException as exc:
        raise Skip("torch is not importable: %s: %s" % (type(exc).__name__, exc)) from None
    has_foreach = hasattr(torch, "_foreach_copy_")
    checks = {"cpu": check_device(torch, "cpu", has_foreach)}
    checks["cpu"]["paths"] = device_paths(ctx, torch, "cpu", has_foreach)
    checks.update(cuda_checks(ctx, torch, has_foreach))
    return {"torch_version": getattr(torch, "__version__", None), "has_foreach_copy": has_foreach,
            "method": "foreach_copy" if has_foreach else "loop", "pair_order": "src->dst",
            "checks": checks}


def cuda_checks(ctx, torch, has_foreach):
    """Checks on each CUDA device torch sees that the GPU policy lets this probe touch (probes/gpu_layer.py):
    idle ones, busy ones only with --force (or cuda=true), a live server's never."""
    options = settings(OPTIONS, ctx.option("torch_caps"))
    mode = str(options["cuda"]).lower()
    if mode in ("false", "0", "no", "off"):
        return {}
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:
        return {"cuda": {"status": "skipped", "ok": None, "reason": "torch.cuda failed: " + fail(exc)}}
    if not count:
        return {}
    force = bool(ctx.option("force", False)) or mode in ("true", "1", "yes", "on")
    uuids = [_uuid(torch, index) for index in range(count)]
    refusals = gpu_refusals(ctx, options, uuids, force)
    checks = {}
    for index in range(count):
        name = "cuda:%d" % index
        if index in refusals:
            checks[name] = {"status": "skipped", "ok": None, "reason": refusals[index]}
            continue
        try:
            checks[name] = check_device(torch, name, has_foreach)
            checks[name]["paths"] = device_paths(ctx, torch, name, has_foreach)
            torch.cuda.synchronize(index)
        except Exception as exc:
            checks[name] = {"status": "error", "ok": False, "reason": fail(exc)}
    _quietly(torch.cuda.empty_cache)
    return checks


def gpu_refusals(ctx, options, uuids, force):
    """{torch index: why this probe leaves that GPU alone}, by the one GPU policy. torch's indices are in
    PCI bus order (the child runs with CUDA_DEVICE_ORDER=PCI_BUS_ID), as nvidia-smi's are."""
    servers = (ctx.results.get("deployment") or {}).get("servers") or []
    limit = float(options.get("busy_memory_mib", gpu_layer.BUSY_MEMORY_MIB))
    seen = gpu_layer.snapshot(ctx)
    if seen["devices"] is None:
        # No process list: every GPU counts as busy; a server's GPUs are found by index or torch's uuids.
        by_uuid = dict((u, i) for i, u in enumerate(uuids) if u)
        protected = gpu_layer.protected_gpus(servers, by_uuid, range(len(uuids)))
        unknown = "busy: cannot tell whether the GPU is idle (%s); %s" % (seen["why"], gpu_layer.FORCE_HINT)
        return dict((i, "serving sglang: " + gpu_layer.NEVER if i in protected else unknown)
                    for i in range(len(uuids)) if i in protected or not force)
    table = gpu_layer.verdicts(seen["devices"], servers, force, limit)
    refusals = {}
    for index, uuid in enumerate(uuids):
        verdict = gpu_layer.verdict_for(table, uuid)
        if not verdict["use"]:
            refusals[index] = gpu_layer.refusal(verdict)
    return refusals


def device_paths(ctx, torch, device, has_foreach):
    """{list kind: {path: fast|per_tensor|unknown, ...}}: did `_foreach_copy_` fuse, or copy tensor by tensor?"""
    kinds = ("contiguous_same_dtype", "non_contiguous", "mixed_pairs_one_call")
    if not has_foreach:
        return {k: {"path": "per_tensor", "how": "no_foreach_copy", "reason": "sglang loops copy_"} for k in kinds}
    if device == "cpu":
        return {k: foreach_path.cpu_path() for k in kinds}
    profile = settings(OPTIONS, ctx.option("torch_caps"))["profile"] not in (False, "false", "0", 0)
    if not profile:
        return {k: {"path": "unknown", "how": "profiler", "reason": "not asked (torch_caps.profile=false)"}
                for k in kinds}
    try:
        return foreach_path.cuda_paths(torch, device)
    except Exception as exc:
        return {k: {"path": "unknown", "how": "profiler", "reason": "could not run: " + fail(exc)} for k in kinds}


def _uuid(torch, index):
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:
        return None
    return uuid if uuid.startswith("GPU-") else "GPU-" + uuid


def _quietly(call):
    try:
        call()
    except Exception:
        pass
