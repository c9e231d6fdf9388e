"""Synthetic CUDA-graph harness: capture a small forward shaped like one speculative replay path (its model
in synthetic_model.py), replay it with fresh inputs copied in as the release copies them (the grouped copy of
probes/foreach_copy.py, the copy benchmark's own), and compare with eager.

Runs inside a worker child (probes.graphrepro.worker); torch is imported in functions only.
"""
import math
import time
import traceback

from probes.crashlog.families import DEVICE_FAULT
from probes.foreach_copy import grouped_foreach_copy
from probes.graphrepro import specs as specs_mod
from probes.graphrepro.synthetic_model import MIB, estimate_bytes, forward, make_buffers, make_weights

REPLAY_TRIALS = 3
# Same kernels in graph and eager: answers agree to rounding (2% of the logit range is far above bf16
# rounding and far below what stale or wrong inputs give).
TOLERANCE = 2e-2
DEFAULT_MAX_MEM_MIB = 4096
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


def copy_inputs(static, fresh, spec_list, grouped=True):
    """As the release copies: small fields through the grouped foreach copy, hidden_states (marked large)
    with its own copy_(); a release that does not batch the path copies every field with copy_()."""
    small = [s["name"] for s in spec_list if grouped and not s["large"]]
    grouped_foreach_copy([static[n] for n in small], [fresh[n] for n in small])
    for spec in spec_list:
        if spec["name"] not in small:
            static[spec["name"]].copy_(fresh[spec["name"]])


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
