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

# (source dtype, destination dtype): sglang's CUDA-graph inputs (ids, positions, lengths, hidden states).
PAIRS = (("int64", "int64"), ("int32", "int32"), ("int32", "int64"), ("int64", "int32"),
         ("float32", "bfloat16"), ("bfloat16", "float32"), ("bfloat16", "bfloat16"), ("float32", "float32"))
SHAPES = ((3,), (2, 5), (7,))
CHILD_TIMEOUT_S = 120.0


def collect(ctx):
    """The checks in the run's torch child (probes/hostinfo/torch_child.py, CUDA_DEVICE_ORDER=PCI_BUS_ID) under
    the host's chosen interpreter (the serving one when a server runs)."""
    options = ctx.option("torch_caps", {}) or {}
    timeout = min(float(options.get("child_timeout", CHILD_TIMEOUT_S)), max(5.0, ctx.time_left() * 0.8))
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
        shared["deployment"] = {"servers": [{k: s.get(k) for k in ("pid", "cuda_visible_devices", "args")}
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


def _fail(exc):
    return "raises: %s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300] if str(exc) else "")


def _sources(torch, dtype, device):
    """Small exactly-representable values (bf16 included), negative ones too."""
    out = []
    for number, shape in enumerate(SHAPES):
        size = 1
        for dim in shape:
            size *= dim
        values = (torch.arange(size, dtype=torch.float32) - size // 2) * (number + 1)
        out.append(values.reshape(shape).to(device=device, dtype=getattr(torch, dtype)))
    return out


def _copy(torch, dst, src, use_foreach, **kwargs):
    if use_foreach:
        torch._foreach_copy_(dst, src, **kwargs)
    else:
        for target, source in zip(dst, src):
            target.copy_(source, **kwargs)


def _verify(torch, dst, src):
    """'ok' or 'wrong: ...': each destination equals its source cast to the destination dtype."""
    for number, (target, source) in enumerate(zip(dst, src)):
        expected = source.to(target.dtype)
        if tuple(target.shape) != tuple(expected.shape) or not torch.equal(target, expected):
            diff = (target.double() - expected.double()).abs().max().item() if target.shape == expected.shape else None
            return "wrong: tensor %d differs (max abs diff %s)" % (number, diff)
    return "ok"


def _attempt(torch, dst, src, use_foreach, **kwargs):
    try:
        _copy(torch, dst, src, use_foreach, **kwargs)
    except Exception as exc:
        return _fail(exc)
    return _verify(torch, dst, src)


def check_device(torch, device, has_foreach):
    """All checks on one device; every value is what happened, not what the version promises."""
    pairs = {}
    for src_dtype, dst_dtype in PAIRS:
        try:
            src = _sources(torch, src_dtype, device)
            dst = [torch.zeros_like(s, dtype=getattr(torch, dst_dtype)) for s in src]
        except Exception as exc:
            pairs["%s->%s" % (src_dtype, dst_dtype)] = _fail(exc)
            continue
        pairs["%s->%s" % (src_dtype, dst_dtype)] = _attempt(torch, dst, src, has_foreach)
    result = {"status": "ok", "ok": all(v == "ok" for v in pairs.values()), "pairs": pairs,
              "method": "foreach_copy" if has_foreach else "loop"}
    if not has_foreach:
        why = "skipped: torch has no _foreach_copy_ (sglang falls back to a per-tensor copy_ loop)"
        result.update(mixed_pairs_one_call=why, non_contiguous=why, mismatched_shapes=why, non_blocking=why)
        return result
    result["mixed_pairs_one_call"] = _guarded(lambda: _mixed(torch, device))
    result["non_contiguous"] = _guarded(lambda: _non_contiguous(torch, device))
    result["mismatched_shapes"] = _guarded(lambda: _mismatched(torch, device))
    if device == "cpu":
        result["non_blocking"] = NON_BLOCKING_CPU
    else:
        directions = _guarded_dict(lambda: non_blocking_directions(torch, device))
        result["non_blocking_directions"] = directions
        result["non_blocking"] = summarize_non_blocking(directions)
    return result


def _guarded(check, wrap=lambda why: why):
    try:
        return check()
    except Exception as exc:  # building the inputs failed: say so, keep the other checks
        return wrap("could not run: %s" % _fail(exc)[len("raises: "):])


def _guarded_dict(check):
    return _guarded(check, lambda why: {"error": why})


def _mixed(torch, device):
    """One call over several (src, dst) dtype pairs: sglang groups by pair, this says whether it must."""
    src = [_sources(torch, "int64", device)[0], _sources(torch, "float32", device)[1],
           _sources(torch, "int32", device)[2]]
    dst = [torch.zeros_like(src[0]), torch.zeros_like(src[1], dtype=torch.bfloat16),
           torch.zeros_like(src[2], dtype=torch.int64)]
    return _attempt(torch, dst, src, True)


def _non_contiguous(torch, device):
    base = _sources(torch, "float32", device)[1]                       # (2, 5)
    src = [base.t(), base[:, ::2], _sources(torch, "int64", device)[2][::3]]
    dst = [torch.zeros(tuple(s.shape), dtype=s.dtype, device=device) for s in src]
    return _attempt(torch, dst, src, True)


def _mismatched(torch, device):
    """'raises: ...' is the safe answer; 'ok' means the call accepted shapes that do not broadcast."""
    dst = [torch.zeros(3, device=device), torch.zeros(4, device=device)]
    src = [torch.ones(3, device=device), torch.ones(5, device=device)]
    try:
        torch._foreach_copy_(dst, src)
    except Exception as exc:
        return _fail(exc)
    return "ok"


NON_BLOCKING_CPU = ("not applicable on the CPU: non_blocking matters for copies between pinned host memory and "
                    "a CUDA device, checked on each idle CUDA device")


def summarize_non_blocking(directions):
    """'ok' when both directions were right, else what went wrong in which direction."""
    wrong = ["%s %s" % (k, v) for k, v in sorted(directions.items()) if v != "ok"]
    return "; ".join(wrong) if wrong else "ok"


def non_blocking_directions(torch, device):
    """{host_to_device, device_to_host}: `_foreach_copy_(non_blocking=True)` between pinned host tensors and
    the device, the case non_blocking exists for (sglang's seq_lens); synchronised before comparing."""
    host = [s.pin_memory() for s in _sources(torch, "int64", "cpu") + _sources(torch, "float32", "cpu")]
    if not all(s.is_pinned() for s in host):
        why = "could not run: pin_memory() gave pageable memory"
        return {"host_to_device": why, "device_to_host": why}
    on_device = [torch.zeros_like(s, device=device) for s in host]
    back = [torch.zeros_like(s).pin_memory() for s in host]
    return {"host_to_device": _synced_attempt(torch, device, on_device, host),
            "device_to_host": _synced_attempt(torch, device, back, [s.to(device) for s in host])}


def _synced_attempt(torch, device, dst, src):
    try:
        torch._foreach_copy_(dst, src, non_blocking=True)
        torch.cuda.synchronize(device)  # the copy may still be in flight: wait before reading it
    except Exception as exc:
        return _fail(exc)
    return _verify(torch, [t.cpu() for t in dst], [s.cpu() for s in src])


def cuda_checks(ctx, torch, has_foreach):
    """Checks on each CUDA device torch sees that the GPU policy lets this probe touch (probes/gpu_layer.py):
    idle ones, busy ones only with --force (or cuda=true), a live server's never."""
    options = ctx.option("torch_caps", {}) or {}
    mode = str(options.get("cuda", "auto")).lower()
    if mode in ("false", "0", "no", "off"):
        return {}
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:
        return {"cuda": {"status": "skipped", "ok": None, "reason": "torch.cuda failed: " + _fail(exc)}}
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
            checks[name] = {"status": "error", "ok": False, "reason": _fail(exc)}
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
    profile = (ctx.option("torch_caps", {}) or {}).get("profile", True) not in (False, "false", "0", 0)
    if not profile:
        return {k: {"path": "unknown", "how": "profiler", "reason": "not asked (torch_caps.profile=false)"}
                for k in kinds}
    try:
        return foreach_path.cuda_paths(torch, device)
    except Exception as exc:
        return {k: {"path": "unknown", "how": "profiler", "reason": "could not run: " + _fail(exc)} for k in kinds}


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
