"""Runs the benchmark job on the CPU or on every selected GPU in turn: idle check first, a memory cap,
everything freed after. Used in-process on the CPU and inside the isolated child on CUDA.
"""
import gc
import time

from probes.copybench import records, strategies, workloads
from probes.copybench.bench import MIB, DeviceBench, run_device
from probes.copybench.budget import Budget
from probes import gpu_layer


def bench_all(job, emit=None, extra_strategies=None):
    """Every device of the job in turn; emit(result) after each one, and emit(records.workload_frame) after each of
    its workloads, so a parent keeps them if the device never finishes. Stops after a CUDA fault."""
    import torch
    seconds = job["budget_s"]
    if job.get("deadline_epoch"):
        seconds = min(seconds, job["deadline_epoch"] - time.time())
    budget = Budget(seconds)
    installed = InstalledLoader(job.get("installed_modules"), strategies.INSTALLED in job["strategies"])
    targets = [None] if job["device"] == "cpu" else list(job["gpus"])
    results = []
    for n, index in enumerate(targets):
        share = Budget(budget.left() / (len(targets) - n))
        streamed = None if emit is None else (lambda w, i=index: emit(records.workload_frame(i, w)))
        try:
            result = bench_one(torch, dict(job, rotation=rotation_of(job, index)), index, share, installed,
                               extra_strategies, on_workload=streamed)
        except Exception as exc:
            result = records.unmeasured_device(index, "error", "%s: %s" % (type(exc).__name__, str(exc)[:400]),
                                               needs_s=device_needs_s(job), name=gpu_name(job, index))
        results.append(result)
        if emit is not None:
            emit(result)
        if result.get("status") == "error" and "CUDA" in result.get("reason", ""):
            break   # the context may be poisoned: the caller starts a fresh process for the rest
    return results


def planned_workloads(job):
    """How many workloads one device's benchmark plans (None when the job does not say)."""
    try:
        return len(workloads.workload_grid(job["paths"], job["batch_sizes"], job["hidden_sizes"]))
    except (KeyError, TypeError, ValueError):
        return None


def device_needs_s(job, done=0):
    """About how long one device's whole benchmark takes, less `done` workloads already measured: every workload
    and sweep size at its declared unit cost."""
    device = job.get("device") or "cuda"
    cells = planned_workloads(job)
    try:
        sweep = job["sweep"]
        sizes = len(workloads.sweep_sizes(sweep["min_bytes"], sweep["max_bytes"], sweep["factor"],
                                          int(job["max_mem_mib"]) * MIB))
    except (KeyError, TypeError, ValueError):
        return None
    if cells is None:
        return None
    return max(0, cells - done) * records.unit_s(job, device, "workload") + sizes * records.unit_s(job, device, "sweep_row")


def gpu_name(job, index):
    """The device's name as the GPU list (env) gave it, for a record written before torch opened the device."""
    if index is None:
        return "cpu"
    names = job.get("gpu_names") or {}
    return names.get(str(index))


def rotation_of(job, index):
    """[place, count]: this GPU's place among every GPU of the job, for the workload rotation."""
    order = list(job.get("all_gpus") or job.get("gpus") or [])
    if index is None or index not in order:
        return [0, 1]
    return [order.index(index), len(order)]


class InstalledLoader(object):
    """Imports the installed sglang's copy functions once, when the first device passed its idle check
    (an sglang import may initialise CUDA)."""

    def __init__(self, modules, wanted):
        self.modules = modules
        self.wanted = wanted
        self.loaded = None

    def get(self):
        """([{module, fn}], [{module, reason}])."""
        if self.loaded is None:
            self.loaded = strategies.load_installed(self.modules) if self.wanted else ([], [])
        return self.loaded


def bench_one(torch, job, index, budget, installed, extra, on_workload=None):
    if index is None:
        # One intra-op thread: on a busy host, waking a copy's worker threads costs more than the copy.
        threads = torch.get_num_threads()
        torch.set_num_threads(int(job.get("cpu_threads") or 1))
        try:
            bench = DeviceBench(torch, "cpu", job, budget, installed, extra, on_workload)
            measured = run_device(bench)
            return records.device_record(None, measured.pop("status"), name="cpu", device="cpu",
                                         threads=torch.get_num_threads(), torch=torch_facts(torch), **measured)
        finally:
            torch.set_num_threads(threads)
    props = torch.cuda.get_device_properties(index)
    head = {"uuid": str(getattr(props, "uuid", "") or ""), "device": "cuda", "torch_device": "cuda:%d" % index,
            "compute_capability": "sm_%d%d" % (props.major, props.minor), "torch": torch_facts(torch)}
    head["idle_check"] = gpu_verdict(job, index, head["uuid"])
    if not head["idle_check"]["use"]:
        return records.device_record(index, "skipped", gpu_layer.refusal(head["idle_check"]), name=props.name,
                                     **head)
    torch.cuda.set_device(index)
    cap = int(job["max_mem_mib"]) * MIB
    # The allocator refuses past the cap: a wrong estimate fails a workload, it cannot crowd a server out.
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / float(props.total_memory)), index)
    torch.cuda.reset_peak_memory_stats(index)
    bench = DeviceBench(torch, "cuda:%d" % index, job, budget, installed, extra, on_workload)
    try:
        measured = run_device(bench)
        result = records.device_record(index, measured.pop("status"), name=props.name, **dict(head, **measured))
    finally:
        del bench
        gc.collect()
        torch.cuda.synchronize(index)
        torch.cuda.empty_cache()
    result["memory"] = {"cap_mib": int(job["max_mem_mib"]),
                        "peak_allocated_mib": round(torch.cuda.max_memory_allocated(index) / float(MIB), 1),
                        "left_allocated_mib": round(torch.cuda.memory_allocated(index) / float(MIB), 1)}
    return result


def torch_facts(torch):
    """The torch that measured: its version and whether it has _foreach_copy_ (so the probe needs no child of its
    own to learn them)."""
    return {"version": str(getattr(torch, "__version__", "") or "") or None,
            "has_foreach_copy": hasattr(torch, "_foreach_copy_")}


def gpu_verdict(job, index, uuid):
    """The GPU layer's verdict the probe computed (probes/gpu_layer.py); without a GPU list every GPU counts
    as busy (--force takes it) and the live servers' indices are never taken."""
    policy = job.get("gpu_policy") or {}
    if policy.get("table") is not None:
        return gpu_layer.verdict_for(policy["table"], uuid)
    if index in (policy.get("protected") or ()):
        return {"use": False, "kind": "server", "reason": "serving sglang: " + gpu_layer.NEVER, "index": index}
    why = "its compute processes cannot be listed (%s)" % (policy.get("why") or "no GPU list")
    force = bool(job.get("force"))
    return {"use": force, "kind": "busy", "reason": why, "forced": force, "index": index}
