"""Synthetic CUDA-graph harness: capture a small forward shaped like one speculative replay path,
replay it with fresh inputs copied in through the grouped foreach copy (probes/foreach_copy.py, the copy
benchmark's own), and compare with eager.

Runs inside a worker child (probes.graphrepro.worker); torch is imported in functions only.
"""
import math
import time
import traceback

from probes.crashlog.families import DEVICE_FAULT
from probes.foreach_copy import grouped_foreach_copy
from probes.graphrepro import specs as specs_mod

REPLAY_TRIALS = 3
POOL_TOKENS = 16384     # rows of the fake KV cache gathered by out_cache_loc
VOCAB = 4096
# Same kernels in graph and eager: answers agree to rounding (2% of the logit range is far above bf16
# rounding and far below what stale or wrong inputs give).
TOLERANCE = 2e-2
DEFAULT_MAX_MEM_MIB = 4096
MIB = 1 << 20
MAX_TRACEBACK_LINES = 40
MAX_TRACEBACK_LINE = 500


def device_info(args):
    """torch build and the CUDA devices this child sees (runs in a child: CUDA init may hang).
    With args["memory"], each device's memory in use (mem_get_info: it counts this child's own context,
    a few hundred MiB, below gpus.BUSY_MEMORY_MIB)."""
    try:
        import torch
    except Exception as exc:
        return {"status": "ok", "torch": None, "reason": "torch does not import: %s" % exc}
    info = {"status": "ok", "torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
            "has_foreach_copy": hasattr(torch, "_foreach_copy_"), "cuda_available": False, "devices": []}
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        for index in range(torch.cuda.device_count() if info["cuda_available"] else 0):
            props = torch.cuda.get_device_properties(index)
            uuid = getattr(props, "uuid", None)
            info["devices"].append({"index": index, "name": props.name,
                                    "uuid": "GPU-%s" % uuid if uuid else None,
                                    "compute_capability": "sm_%d%d" % (props.major, props.minor),
                                    "memory_total_mib": int(props.total_memory // MIB)})
    except Exception as exc:
        info["reason"] = "CUDA query failed: %s" % exc
    if args.get("memory"):
        _memory_in_use(torch, info)
    return info


def _memory_in_use(torch, info):
    """memory_used_mib per device, or memory_error saying why it is unknown."""
    info["memory_error"] = None if info["devices"] else "no device"
    try:
        for device in info["devices"]:
            free, total = torch.cuda.mem_get_info(device["index"])
            device["memory_used_mib"] = int((total - free) // MIB)
    except Exception as exc:
        info["memory_error"] = "mem_get_info failed: %s: %s" % (type(exc).__name__, str(exc)[:200])


_SMALL_COUNTS = ("seq_lens", "extend_seq_lens", "positions", "num_correct_drafts",
                 "num_accept_tokens", "num_accepted_drafts", "num_accepted_tokens", "select_index")


def make_buffers(torch, spec_list, device, generator, pool_tokens=POOL_TOKENS, vocab=VOCAB, dtype_key="dtype"):
    """One set of valid inputs for the specs (random ids, locations inside the pool, lengths >= 1), in
    the static buffers' dtypes, or with dtype_key="src_dtype" in the batch's (the replay copy casts)."""
    out = {}
    for spec in spec_list:
        shape, name = tuple(spec["shape"]), spec["name"]
        dtype = getattr(torch, spec.get(dtype_key) or spec["dtype"])
        if name in ("input_ids", "topk_index"):
            value = torch.randint(0, vocab, shape, generator=generator)
        elif name == "out_cache_loc":
            value = torch.randint(0, pool_tokens, shape, generator=generator)
        elif name == "req_pool_indices":
            value = torch.randint(0, 256, shape, generator=generator)
        elif name in _SMALL_COUNTS:
            value = torch.randint(1, 64, shape, generator=generator)
        elif spec["dtype"] == "bool":
            value = torch.rand(shape, generator=generator) > 0.3
        else:
            value = torch.randn(shape, generator=generator)
        out[name] = value.to(dtype=dtype).to(device)
    return out


def make_weights(torch, hidden, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(hidden)

    def param(*shape):
        return (torch.randn(shape, generator=generator) * scale).to(device=device, dtype=torch.bfloat16)

    return {"embed": param(VOCAB, hidden), "pos": param(128, hidden), "kv": param(POOL_TOKENS, hidden),
            "wq": param(hidden, hidden), "wk": param(hidden, hidden), "wv": param(hidden, hidden),
            "out": param(hidden, VOCAB)}


def forward(torch, bufs, weights, path, batch_size, per_request, topk, steps):
    """Embedding + position, KV gather by out_cache_loc, masked block attention, logits, top-k.

    The EAGLE draft runs `steps` draft steps, each feeding its top-1 back (unrolled in the graph).
    """
    bs, hidden = batch_size, weights["wq"].shape[0]
    tokens = bs * per_request
    # The EAGLE draft copies no input_ids: its first step reads the previous top-k tokens.
    ids = bufs["input_ids"] if "input_ids" in bufs else bufs["topk_index"].reshape(-1)
    logits = values = index = None
    for step in range(steps if path == "eagle_draft" else 1):
        x = weights["embed"][ids] + weights["pos"][bufs["positions"] % 128]
        if "hidden_states" in bufs:
            h = bufs["hidden_states"]
            x = x + (_repeat_rows(h, per_request) if h.shape[0] == bs and per_request > 1 else h)
        kv = weights["kv"][bufs["out_cache_loc"][step * tokens:(step + 1) * tokens]]
        q = (x @ weights["wq"]).view(bs, per_request, hidden)
        k = (kv @ weights["wk"]).view(bs, per_request, hidden)
        v = (kv @ weights["wv"]).view(bs, per_request, hidden)
        scores = (q @ k.transpose(1, 2)).float() / math.sqrt(hidden)
        scores = scores.masked_fill(~_block_mask(torch, bufs, path, bs, per_request, ids.device), float("-inf"))
        attn = torch.softmax(scores, dim=-1).to(v.dtype) @ v
        logits = (attn.reshape(tokens, hidden) @ weights["out"]).float()
        if "topk_p" in bufs:
            logits = logits + _repeat_rows(bufs["topk_p"].float().mean(dim=1, keepdim=True), per_request)
        values, index = logits.topk(max(1, topk), dim=-1)
        ids = index[:, 0]
    return {"logits": logits, "topk_values": values, "topk_index": index}


def _repeat_rows(t, times):
    """Each row `times` times in a row, by expand (no host sync, safe inside a capture)."""
    return t.unsqueeze(1).expand(t.shape[0], times, *t.shape[1:]).reshape(t.shape[0] * times, *t.shape[1:])


def _block_mask(torch, bufs, path, bs, per_request, device):
    """Causal inside the block for EAGLE; the whole block for DFlash."""
    if path == "dflash_verify":
        mask = torch.ones(bs, per_request, per_request, dtype=torch.bool, device=device)
    else:
        mask = torch.ones(per_request, per_request, dtype=torch.bool, device=device).tril()
        mask = mask.unsqueeze(0).expand(bs, per_request, per_request)
    # Keys past the request's length are masked; the diagonal always stays so no row is empty.
    valid = torch.arange(per_request, device=device)[None, :] < bufs["seq_lens"].long().clamp(min=1)[:, None]
    diagonal = torch.eye(per_request, dtype=torch.bool, device=device).unsqueeze(0)
    return (mask & valid[:, None, :]) | diagonal


def copy_inputs(static, fresh, spec_list, grouped=True):
    """As the release copies: small fields through the grouped foreach copy, hidden_states (marked large)
    with its own copy_(); a release that does not batch the path copies every field with copy_()."""
    small = [s["name"] for s in spec_list if grouped and not s["large"]]
    grouped_foreach_copy([static[n] for n in small], [fresh[n] for n in small])
    for spec in spec_list:
        if spec["name"] not in small:
            static[spec["name"]].copy_(fresh[spec["name"]])


def estimate_bytes(spec_list, hidden, batch_size, per_request, vocab=VOCAB, pool_tokens=POOL_TOKENS):
    """Upper estimate of what one cell allocates: weights, three input sets (static and two fresh), and
    the activations of the captured forward and of the eager one, with a quarter on top."""
    weights = 2 * (2 * vocab * hidden + 128 * hidden + pool_tokens * hidden + 3 * hidden * hidden)
    tokens = batch_size * per_request
    activations = (8 * tokens * hidden * 2 + batch_size * per_request * per_request * 11
                   + 2 * tokens * vocab * 4)
    return int(1.25 * (weights + 3 * specs_mod.buffer_bytes(spec_list) + 2 * activations))


def cap_memory(torch, device, max_mem_mib):
    """Cap this process's caching allocator at `max_mem_mib` on `device`; returns the cap in MiB applied."""
    total = torch.cuda.get_device_properties(device).total_memory
    fraction = min(1.0, max_mem_mib * MIB / float(total))
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return int(min(max_mem_mib, total // MIB))


def run_cell(args):
    """One cell: capture, replay with fresh inputs, compare. Returns {status, detail, max_abs_diff, ...}.
    The child's allocator is capped at args["max_mem_mib"]; a cell estimated above it is skipped."""
    try:
        import torch
    except Exception as exc:
        return {"status": "skipped", "detail": "torch does not import: %s" % exc}
    if not torch.cuda.is_available():
        return {"status": "skipped", "detail": "CUDA is not available to torch %s" % torch.__version__}
    path, bs = args["path"], int(args["batch_size"])
    draft_tokens, topk = int(args["draft_tokens"]), int(args.get("topk", 1))
    hidden = int(args.get("hidden_size", 1024))
    spec_list = specs_mod.buffer_specs(path, bs, draft_tokens, topk, hidden, args.get("steps"),
                                       release=args.get("release"), names=args.get("field_names"))
    per_request = specs_mod.tokens_per_request(path, draft_tokens, topk)
    steps = int(args.get("steps") or specs_mod.eagle_steps(draft_tokens, topk))
    cap_mib = int(args.get("max_mem_mib") or DEFAULT_MAX_MEM_MIB)
    need_mib = -(-estimate_bytes(spec_list, hidden, bs, per_request) // MIB)
    memory = {"memory_cap_mib": cap_mib, "estimated_mib": need_mib}
    if need_mib > cap_mib:
        return dict(memory, status="skipped", detail="needs about %d MiB, above the memory cap of %d MiB "
                                                     "(max_mem_mib)" % (need_mib, cap_mib))
    device = torch.device("cuda", 0)
    try:
        memory["memory_cap_mib"] = cap_memory(torch, device, cap_mib)
        result = _capture_and_compare(torch, args, path, bs, draft_tokens, topk, hidden, spec_list, per_request,
                                      steps, device)
    except Exception as exc:  # weights and inputs are allocated before the staged part
        result = _failure("setup", exc)
    result.update(memory)
    if result["status"] != "ok" and "out of memory" in str(result.get("detail")).lower():
        result.update(status="skipped", detail="over the memory cap of %d MiB: %s" % (
            memory["memory_cap_mib"], result["detail"]))
    return result


def _capture_and_compare(torch, args, path, bs, draft_tokens, topk, hidden, spec_list, per_request, steps,
                         device):
    generator = torch.Generator().manual_seed(1234 + bs * 131 + draft_tokens)
    weights = make_weights(torch, hidden, device)
    static = make_buffers(torch, spec_list, device, generator)

    def run(bufs):
        return forward(torch, bufs, weights, path, bs, per_request, topk, steps)

    stage = "warmup"
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                run(static)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        stage = "capture"
        started = time.perf_counter()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = run(static)
        torch.cuda.synchronize()
        capture_s = time.perf_counter() - started
        stage = "replay"
        grouped = specs_mod.copies_grouped(path, args.get("release"))
        diffs, scales, non_finite = [], [1e-3], 0
        for _ in range(REPLAY_TRIALS):
            fresh = make_buffers(torch, spec_list, device, generator, dtype_key="src_dtype")
            copy_inputs(static, fresh, spec_list, grouped)
            graph.replay()
            torch.cuda.synchronize()
            stage = "eager"
            expected = run(fresh)
            torch.cuda.synchronize()
            stage = "replay"
            non_finite += int((~torch.isfinite(captured["logits"])).sum().item())
            diffs.append(float((captured["logits"] - expected["logits"]).abs().max().item()))
            scales.append(float(expected["logits"].abs().max().item()))
    except Exception as exc:
        return _failure(stage, exc)
    result = {"status": "ok", "capture_s": round(capture_s, 4),
              "input_bytes": specs_mod.buffer_bytes(spec_list), "fields": [s["name"] for s in spec_list],
              "fields_of": specs_mod.table_release_name(args.get("release")),
              "copies": "grouped" if grouped else "per_tensor"}
    result.update(compare_replays(diffs, scales, non_finite))
    return result


def compare_replays(diffs, scales, non_finite=0):
    """{status, max_abs_diff[, detail]} from each replay's largest difference to eager and eager's scale.

    NaN or Inf anywhere is a failure: Python's max() would skip a NaN and call the replay exact, and
    JSON cannot carry either, so max_abs_diff is then None."""
    bad = [d for d in list(diffs) + list(scales) if not math.isfinite(d)]
    if non_finite or bad:
        what = "%d logits" % non_finite if non_finite else "the difference to eager"
        return {"status": "mismatch", "max_abs_diff": None, "non_finite": non_finite or len(bad),
                "detail": "graph replay produced NaN or Inf (%s)" % what}
    worst = max(diffs) if diffs else 0.0
    scale = max(scales) if scales else 1e-3
    if worst > TOLERANCE * scale:
        return {"status": "mismatch", "max_abs_diff": worst,
                "detail": "graph replay differs from eager by %.3g" % worst}
    return {"status": "ok", "max_abs_diff": worst}


def _failure(stage, exc):
    """The cell's status by stage, with the traceback kept for the crash-log classifier (frames through
    torch's capture_end tell a capture failure the same way they do in a server's log)."""
    text = "%s: %s" % (type(exc).__name__, str(exc)[:800])
    if DEVICE_FAULT.search(text):
        status = "device_fault"
    elif stage == "setup":
        status = "error"
    elif stage in ("capture", "warmup"):
        status = "capture_failed"
    else:
        status = "replay_failed"
    printed = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    lines = [line[:MAX_TRACEBACK_LINE] for line in printed[-MAX_TRACEBACK_LINES:]]
    return {"status": status, "detail": "%s during %s" % (text, stage), "stage": stage, "traceback": lines}
