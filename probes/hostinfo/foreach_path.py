"""Which path `torch._foreach_copy_` takes for a tensor list: one fused multi-tensor kernel (fast) or a
`copy_` per tensor (per_tensor), told on CUDA from the kernels torch.profiler records.

On CUDA (aten/src/ATen/native/cuda/ForeachBinaryOpList.cu, foreach_tensor_copy_list_kernel_cuda_) the fused
`multi_tensor_apply_kernel` runs only when every tensor shares one device, each list one dtype, and each
destination the sizes and strides of its source; otherwise it calls foreach_tensor_copy_list_kernel_slow_,
a loop of `copy_` (one memcpy or elementwise copy kernel per tensor). On CPU, native_functions.yaml
dispatches `_foreach_copy_` to that slow kernel only (aten/src/ATen/native/ForeachOpsKernels.cpp):
the CPU path is always per tensor.
"""
FAST_MARK = "multi_tensor_apply"
# Kernel or activity names of a single-tensor copy: cudaMemcpy activities and ATen's copy kernels.
COPY_MARKS = ("memcpy", "copy_kernel", "copy_device_to_device", "elementwise_kernel")
CPU_SOURCE = ("native_functions.yaml: _foreach_copy_ on CPU is foreach_tensor_copy_list_kernel_slow_ "
              "(ForeachOpsKernels.cpp), a copy_ per tensor")


def cpu_path():
    return {"path": "per_tensor", "how": "dispatch", "source": CPU_SOURCE}


def device_kernel_names(events):
    """Names of the device-side events in a profiler's event list (kernels and memcpy activities).
    Kineto marks them with device_type CUDA; older profilers hang them under CPU ops as `kernels`."""
    names = [str(getattr(e, "name", "")) for e in events or ()
             if str(getattr(e, "device_type", "")).upper().endswith("CUDA")]
    if names:
        return names
    for event in events or ():
        for kernel in getattr(event, "kernels", None) or ():
            names.append(str(getattr(kernel, "name", kernel)))
    return names


def classify(names, tensors):
    """{path: fast|per_tensor|unknown, kernels, launches, reason}: fast when a multi-tensor kernel ran; per_tensor
    when at least one single-tensor copy ran per tensor and no fused kernel; unknown otherwise (no kernels
    recorded, e.g. CUPTI not permitted, or too few to tell)."""
    lowered = [name.lower() for name in names]
    fused = sum(1 for name in lowered if FAST_MARK in name)
    copies = sum(1 for name in lowered if any(mark in name for mark in COPY_MARKS))
    kernels = sorted(set(name[:120] for name in names))[:8]
    if fused:
        path, reason = "fast", None
    elif copies >= tensors:
        path, reason = "per_tensor", None
    elif not names:
        path, reason = "unknown", "the profiler recorded no device kernels"
    else:
        path, reason = "unknown", "%d copy kernel(s) for %d tensors and no multi-tensor kernel" % (copies, tensors)
    return {"path": path, "how": "profiler", "kernels": kernels, "launches": len(names), "reason": reason}


def profile_path(torch, dst, src):
    """Run one `_foreach_copy_(dst, src)` on CUDA under torch.profiler and classify the kernels it launched."""
    try:
        torch._foreach_copy_(dst, src)  # warm-up: lazy initialisation must not show up as kernels
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            torch._foreach_copy_(dst, src)
            torch.cuda.synchronize()
        names = device_kernel_names(prof.events())
    except Exception as exc:
        return {"path": "unknown", "how": "profiler", "kernels": [], "launches": 0,
                "reason": "profiling failed: %s: %s" % (type(exc).__name__, str(exc)[:200])}
    return classify(names, len(src))


def path_lists(torch, device):
    """{check: (dst, src)}: a contiguous same-dtype list (the fused kernel's case), a non-contiguous list of one
    dtype, and a list mixing source dtypes (sglang's graph inputs when not grouped by pair)."""
    shapes = ((3,), (2, 5), (7,))
    contiguous = [torch.arange(_size(s), dtype=torch.float32, device=device).reshape(s) for s in shapes]
    base = torch.arange(40, dtype=torch.float32, device=device).reshape(4, 10)
    strided = [base.t(), base[:, ::2], base[1, ::3]]
    mixed = [torch.arange(3, dtype=torch.int64, device=device), torch.ones(2, 5, device=device),
             torch.arange(7, dtype=torch.int32, device=device)]
    return {"contiguous_same_dtype": ([torch.zeros_like(t) for t in contiguous], contiguous),
            "non_contiguous": ([torch.zeros(tuple(t.shape), dtype=t.dtype, device=device) for t in strided], strided),
            "mixed_pairs_one_call": ([torch.zeros_like(t, dtype=torch.int64) for t in mixed], mixed)}


def _size(shape):
    size = 1
    for dim in shape:
        size *= dim
    return size


def cuda_paths(torch, device):
    """{check: path record} on one CUDA device; the device must be current for the profiler's synchronize."""
    out = {}
    with torch.cuda.device(device):
        for check, (dst, src) in path_lists(torch, device).items():
            out[check] = profile_path(torch, dst, src)
    return out
