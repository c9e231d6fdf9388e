"""Timing of one copy strategy: many iterations per sample, ≥10 samples, median, p10/p90 and spread.

CUDA: events around the iterations (eager) or around replays of a captured graph holding many copies
(launch overhead removed). CPU: time.perf_counter_ns around the iterations.
"""
import math
import time

NOISY_CV = 0.05


def percentile(sorted_values, q):
    """Linear-interpolated percentile (0..100) of already sorted values."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_us, method, iterations):
    """The timing record every copy_bench figure carries."""
    values = sorted(float(v) for v in samples_us)
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    cv = math.sqrt(var) / mean if mean > 0 else 0.0
    return {"method": method, "samples": len(values), "iterations": iterations,
            "median_us": round(percentile(values, 50), 3), "p10_us": round(percentile(values, 10), 3),
            "p90_us": round(percentile(values, 90), 3), "cv": round(cv, 4), "noisy": cv > NOISY_CV}


def iterations_for(single_us, target_us, max_iters):
    """Iterations per sample so one sample lasts about target_us."""
    if single_us <= 0:
        return max_iters
    return int(max(1, min(max_iters, round(target_us / single_us))))


class CpuTimer(object):
    method = "perf_counter"

    def sync(self):
        pass

    def sample(self, fn, iterations):
        """Microseconds per call over `iterations` calls."""
        start = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        return (time.perf_counter_ns() - start) / 1000.0 / iterations


class CudaEventTimer(object):
    """Events on the current stream around the iterations: the GPU timeline, host enqueue included."""
    method = "cuda_events"

    def __init__(self, torch):
        self.torch = torch
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def sync(self):
        self.torch.cuda.synchronize()

    def sample(self, fn, iterations):
        self.start.record()
        for _ in range(iterations):
            fn()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1000.0 / iterations


def measure(timer, fn, samples, target_us, max_iters, warmup=3, per_call_divisor=1):
    """Warm up, size the sample, take `samples` samples; times are per call (divided for graph replays)."""
    for _ in range(warmup):
        fn()
    timer.sync()
    iterations = iterations_for(timer.sample(fn, 1), target_us, max_iters)
    values = [timer.sample(fn, iterations) / per_call_divisor for _ in range(samples)]
    method = timer.method if per_call_divisor == 1 else "cuda_graph_replay"
    return summarize(values, method, iterations * per_call_divisor)


def capture_graph(torch, fn, copies):
    """A CUDA graph holding `copies` calls of fn, warmed up on a side stream as capture requires."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(copies):
            fn()
    torch.cuda.synchronize()
    return graph
