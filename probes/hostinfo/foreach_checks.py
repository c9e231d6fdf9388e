"""torch._foreach_copy_ checked on one device, by running it: per (src, dst) dtype pair, one call mixing pairs,
non-contiguous sources, mismatched shapes, and non_blocking copies between pinned host memory and a GPU. Every
value is what happened (ok, wrong: …, raises: …), never what the version promises. Runs in the torch child of
the torch_caps probe.
"""

# (source dtype, destination dtype): sglang's CUDA-graph inputs (ids, positions, lengths, hidden states).
PAIRS = (("int64", "int64"), ("int32", "int32"), ("int32", "int64"), ("int64", "int32"),
         ("float32", "bfloat16"), ("bfloat16", "float32"), ("bfloat16", "bfloat16"), ("float32", "float32"))
SHAPES = ((3,), (2, 5), (7,))


def fail(exc):
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
        return fail(exc)
    return _verify(torch, dst, src)


def check_device(torch, device, has_foreach):
    """All checks on one device; every value is what happened, not what the version promises."""
    pairs = {}
    for src_dtype, dst_dtype in PAIRS:
        try:
            src = _sources(torch, src_dtype, device)
            dst = [torch.zeros_like(s, dtype=getattr(torch, dst_dtype)) for s in src]
        except Exception as exc:
            pairs["%s->%s" % (src_dtype, dst_dtype)] = fail(exc)
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
        return wrap("could not run: %s" % fail(exc)[len("raises: "):])


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
        return fail(exc)
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
        return fail(exc)
    return _verify(torch, [t.cpu() for t in dst], [s.cpu() for s in src])
