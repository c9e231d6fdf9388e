"""Host→device copies on one CUDA device: seq_lens_cpu from a pinned (async) against a pageable source, and what one
synchronize costs."""
import functools
import time

from probes.copybench.timing import CpuTimer, measure


def measure_h2d(bench):
    """seq_lens_cpu → GPU: pinned (async) vs pageable source, and the cost of one synchronize."""
    torch = bench.torch
    n = max(bench.job["batch_sizes"])
    pageable = torch.arange(1, n + 1, dtype=torch.int32)
    pinned = pageable.pin_memory()
    dev = torch.empty(n, dtype=torch.int32, device=bench.device)
    timer = _SyncedCpuTimer(torch)
    out = {"bytes": n * 4, "method": "perf_counter, synchronize after each sample"}
    for key, src in (("pinned", pinned), ("pageable", pageable)):
        dev.zero_()
        fn = functools.partial(dev.copy_, src, non_blocking=True)
        timing = measure(timer, fn, bench.job["samples"], bench.job["target_us"], bench.job["max_iters"])
        ok = bool(torch.equal(dev.cpu(), pageable))
        out[key] = dict(timing, status="ok" if ok else "wrong")
        out[key + "_us"] = timing["median_us"] if ok else None
    out["sync"] = measure(CpuTimer(), torch.cuda.synchronize, bench.job["samples"], bench.job["target_us"],
                          bench.job["max_iters"])
    out["sync_us"] = out["sync"]["median_us"]
    return out


class _SyncedCpuTimer(CpuTimer):
    """Wall time of the iterations including the wait for the device to finish them."""

    def __init__(self, torch):
        self.torch = torch

    def sample(self, fn, iterations):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        self.torch.cuda.synchronize()
        return (time.perf_counter_ns() - start) / 1000.0 / iterations
