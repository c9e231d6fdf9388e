"""Measurements on one device: the one-tensor sweep, every strategy on every workload, host→device copies (timed in
probes/copybench/h2d.py), within the run's time budget (probes/copybench/budget.py).

Every strategy is verified before it is timed and again after; one that copied wrong is `wrong` and is
never timed as a success. Needs torch (imported by the caller and passed in).
"""
import functools
import os

from probes.copybench import analysis, records, strategies, workloads
from probes.copybench.budget import Budget, UnitClock
from probes.copybench.h2d import measure_h2d
from probes.copybench.timing import CpuTimer, CudaEventTimer, capture_graph, measure

MIB = 1024 * 1024
FIELD_SPAN = 1 << 20   # integer sources: field k holds k*FIELD_SPAN+1 … (k+1)*FIELD_SPAN
# Workload memory: sources, their saved copies, destinations, and the packed arena with its staging.
WORKLOAD_COPIES = 5


class DeviceBench(object):
    """One device's benchmark: a timer, the job's settings, and the tensors it allocates (freed by owner)."""

    def __init__(self, torch, device, job, budget, installed=None, extra_strategies=None, on_workload=None):
        self.torch = torch
        self.device = device
        self.job = job
        self.budget = budget
        self.installed = installed   # an InstalledLoader, or None
        self.extra = dict(extra_strategies or {})
        self.on_workload = on_workload   # called with each workload's record as soon as it is done
        self.cuda = device.startswith("cuda")
        self.timer = CudaEventTimer(torch) if self.cuda else CpuTimer()
        self.cap_bytes = int(job["max_mem_mib"]) * MIB
        self.units = UnitClock("cuda" if self.cuda else "cpu", budget, job)

    # --- helpers ---------------------------------------------------------------------------------------
    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _timing(self, fn, divisor=1, max_iters=None):
        job = self.job
        return measure(self.timer, fn, job["samples"], job["target_us"], max_iters or job["max_iters"],
                       per_call_divisor=divisor)

    def source(self, dtype_name, shape, field=0):
        """Non-zero values, each field in its own range: a strategy that copies nothing, copies the wrong
        field or writes into its sources is caught by the comparison with the saved copy."""
        torch = self.torch
        dtype = getattr(torch, dtype_name)
        if dtype == torch.bool:
            return torch.ones(shape, dtype=dtype, device=self.device)
        if dtype.is_floating_point:
            values = torch.empty(shape, dtype=torch.float32, device=self.device).uniform_(0.5, 1.5)
            return (values + 2.0 * field).to(dtype)
        count = 1
        for dim in shape:
            count *= int(dim)
        values = torch.arange(count, dtype=torch.int64, device=self.device) % FIELD_SPAN + 1 + FIELD_SPAN * field
        return values.reshape(shape).to(dtype)

    def reset(self, dsts, srcs, refs):
        """Zero the destinations and refill the sources from their saved copies (a strategy may have
        written into them)."""
        for dst in dsts:
            dst.zero_()
        for src, ref in zip(srcs, refs):
            src.copy_(ref)
        self._sync()

    # --- one strategy ----------------------------------------------------------------------------------
    def run_strategy(self, names, fn, dsts, srcs, refs, graph=True):
        """Verify, time, verify again; then the same inside a captured graph on CUDA. Destinations are
        compared with `refs`, copies of the sources saved before any strategy ran, and the sources must
        still equal them afterwards."""
        def check():
            self.reset(dsts, srcs, refs)
            fn()
            self._sync()
            return self.wrong(names, dsts, srcs, refs)
        try:
            wrong = check()
            if wrong:
                return {"status": "wrong", "reason": wrong}
            entry = dict(self._timing(fn), status="ok")
            self._sync()
            wrong = self.wrong(names, dsts, srcs, refs)
        except Exception as exc:
            return {"status": "error", "reason": "%s: %s" % (type(exc).__name__, str(exc)[:300])}
        if wrong:
            return {"status": "wrong", "reason": "after timing: " + wrong}
        if graph and self.cuda and self.job.get("graph", True):
            entry["graph"] = self.run_in_graph(names, fn, dsts, srcs, refs)
        return entry

    @staticmethod
    def wrong(names, dsts, srcs, refs):
        return strategies.verify(names, dsts, refs) or strategies.sources_changed(names, srcs, refs)

    def run_in_graph(self, names, fn, dsts, srcs, refs):
        copies = max(1, int(self.job.get("graph_copies", 20)))
        graph = None
        try:
            graph = capture_graph(self.torch, fn, copies)
            self.reset(dsts, srcs, refs)
            graph.replay()
            self._sync()
            wrong = self.wrong(names, dsts, srcs, refs)
            if wrong:
                return {"status": "wrong", "reason": wrong}
            max_iters = max(1, self.job["max_iters"] // copies)
            return dict(self._timing(graph.replay, divisor=copies, max_iters=max_iters), status="ok")
        except Exception as exc:
            self._sync()  # a poisoned context raises here and ends this device's run
            return {"status": "error", "reason": "graph: %s: %s" % (type(exc).__name__, str(exc)[:300])}
        finally:
            del graph

    # --- the sweep ---------------------------------------------------------------------------------------
    def sweep(self, until=None):
        """[{bytes, copy_us, foreach_us, copy_graph_us, foreach_graph_us, copy, foreach}]: one contiguous tensor,
        copy_() vs the foreach kernel, eagerly and (on CUDA) inside a replayed graph; `until` (a Budget) ends
        the sweep early, each size not timed saying the time it would have needed."""
        job, torch = self.job, self.torch
        sweep_job = job["sweep"]
        itemsize = workloads.dtype_size(sweep_job["dtype"])
        foreach = getattr(torch, "_foreach_copy_", None)
        rows = []
        for size in workloads.sweep_sizes(sweep_job["min_bytes"], sweep_job["max_bytes"],
                                          sweep_job["factor"], self.cap_bytes):
            if not self.units.fits("sweep_row") or (until is not None and until.spent()):
                rows.append(records.sweep_row(size, status="skipped", **self.units.skip("sweep_row")))
                continue
            rows.append(self.units.timed("sweep_row", lambda size=size: self._sweep_row(size, itemsize, foreach)))
        return rows

    def _sweep_row(self, size, itemsize, foreach):
        torch, dtype = self.torch, self.job["sweep"]["dtype"]
        src = self.source(dtype, (max(1, size // itemsize),))
        dst, refs = torch.empty_like(src), [src.clone()]
        copy = self.run_strategy(["tensor"], lambda: dst.copy_(src), [dst], [src], refs)
        if foreach is not None:
            fe = self.run_strategy(["tensor"], lambda: foreach([dst], [src]), [dst], [src], refs)
        else:
            fe = {"status": "skipped", "reason": "torch %s has no _foreach_copy_" % torch.__version__}
        return records.sweep_row(size, copy, fe)

    # --- workloads -----------------------------------------------------------------------------------------
    def workload(self, path, batch_size, hidden_size, threshold):
        done = self._workload(path, batch_size, hidden_size, threshold)
        if self.on_workload is not None:
            self.on_workload(done)
        return done

    def _workload(self, path, batch_size, hidden_size, threshold):
        job = self.job
        specs = workloads.field_specs(path, batch_size, hidden_size, job["topk"], job["steps"],
                                      job["draft_tokens"], job["hidden_dtype"],
                                      names=(job.get("field_names") or {}).get(path), release=job.get("release"))
        total = sum(s["bytes"] for s in specs)
        fields = records.marked_fields(specs, threshold)
        name = workloads.workload_name(path, batch_size, hidden_size)

        def record(status, **more):
            return records.workload_record(name, path, batch_size, hidden_size, status, fields,
                                           total_bytes=total, **more)
        if WORKLOAD_COPIES * total > self.cap_bytes:
            return record("skipped", reason="needs about %d MiB, over max_mem_mib=%d"
                          % (WORKLOAD_COPIES * total // MIB + 1, job["max_mem_mib"]))
        if not self.units.fits("workload"):
            return record("skipped", **self.units.skip("workload"))
        return self.units.timed("workload", lambda: self._measure(record, specs, path, threshold))

    def _measure(self, record, specs, path, threshold):
        job = self.job
        names = [s["name"] for s in specs]
        srcs = [self.source(s.get("src_dtype") or s["dtype"], tuple(s["shape"]), n) for n, s in enumerate(specs)]
        refs = [src.clone() for src in srcs]   # what every strategy is checked against, saved once
        dsts = [self.torch.empty(tuple(s["shape"]), dtype=getattr(self.torch, s["dtype"]), device=self.device)
                for s in specs]
        behaviour = (job.get("behaviour") or {}).get(path) or {}
        results = {}
        # The installed function first: it is the baseline the report prices every other strategy against.
        self._installed(results, names, dsts, srcs, refs, behaviour)
        for name, (fn, out_dsts) in self._runners(names, dsts, srcs, threshold, behaviour):
            if name in job["strategies"] or name in self.extra:
                results[name] = self.run_strategy(names, fn, out_dsts, srcs, refs)
        analysis.add_speedups(results)
        saving, baseline = analysis.saving_vs_installed(results, behaviour)
        return record("ok", strategies=results, best=analysis.best_strategy(results),
                      best_graph=analysis.best_strategy(results, "graph"), saving_vs_installed_us=saving,
                      installed_baseline=baseline)

    def _runners(self, names, dsts, srcs, threshold, behaviour):
        for item in strategies.runners(names, dsts, srcs, threshold,
                                       self.device if strategies.PACKED in self.job["strategies"] else None):
            yield item
        for name, fn in self.extra.items():
            yield name, ((lambda f=fn: f(dsts, srcs)), dsts)

    def _installed(self, results, names, dsts, srcs, refs, behaviour):
        if strategies.INSTALLED not in self.job["strategies"]:
            return
        loaded, failures = self.installed.get() if self.installed is not None else ([], [])
        if not loaded:
            reasons = "; ".join(f["reason"] for f in failures) or "no installed _grouped_foreach_copy_ was loaded"
            results[strategies.INSTALLED] = {"status": "skipped", "reason": reasons}
            return
        separate = None
        if behaviour.get("hidden_states_separate") and workloads.HIDDEN in names:
            separate = names.index(workloads.HIDDEN)
        variants = {}
        for item in loaded:
            runner = strategies.InstalledCopy(item["fn"], dsts, separate)
            run = functools.partial(self.run_strategy, names, functools.partial(runner, srcs), dsts, srcs, refs)
            variants[item["module"]] = dict(run(), module=item["module"], hidden_states_separate=separate is not None)
            for gate in item.get("env_gates") or ():
                variants[item["module"]].setdefault("env", {})[gate] = env_on_off(gate, run)
        chosen = behaviour.get("module") if behaviour.get("module") in variants else loaded[0]["module"]
        results[strategies.INSTALLED] = dict(variants[chosen])
        if failures:
            results[strategies.INSTALLED]["not_loaded"] = failures
        if len(variants) > 1:
            results[strategies.INSTALLED]["variants"] = variants


def env_on_off(name, run):
    """{host_value, on, off}: `run()` with the environment variable set to 1 and to 0 (the installed
    function reads it on every call), then the host's own value put back."""
    host = os.environ.get(name)
    out = {"host_value": host}
    try:
        for label, value in (("on", "1"), ("off", "0")):
            os.environ[name] = value
            out[label] = dict(run(), env="%s=%s" % (name, value))
    finally:
        if host is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = host
    return out


def run_device(bench):
    """The whole result for one device (status ok). Most informative first: the workloads Q5 reads (at the live
    server's batch size, else the largest, on every path), then the size sweep (copy_() against the foreach kernel
    in both clocks, at most half the time then left), then the other workloads in this device's rotated order,
    then host→device copies. What the time did not reach is listed with the time it would have needed."""
    job = bench.job
    grid, offset = workloads.device_grid(job)
    first = workloads.priority_cells(grid, job.get("live_batch_size"))
    split = job.get("split_bytes")
    done = {cell: bench.workload(cell[0], cell[1], cell[2], split) for cell in first}
    sweep = bench.sweep(until=Budget(max(0.0, bench.budget.left()) / 2.0))
    clock = analysis.sweep_clock(sweep)
    crossover = analysis.crossover_bytes(sweep, clock)
    split, why = analysis.recommended_split(crossover, job.get("split_bytes"), cuda=bench.cuda, clock=clock)
    for cell in grid:
        if cell not in done:
            done[cell] = bench.workload(cell[0], cell[1], cell[2], split)
    order = first + [cell for cell in grid if cell not in first]
    result = {"status": "ok", "sweep": sweep, "crossover_bytes": crossover, "crossover_clock": clock,
              "recommended_split_bytes": split, "split_reason": why,
              "workloads": [done[cell] for cell in order]}
    result.update(analysis.budget_losses([done[cell] for cell in grid], offset))
    needs = [w.get("needs_s") or 0.0 for w in result["workloads"]] + [r.get("needs_s") or 0.0 for r in sweep]
    result["time_needed_s"] = round(sum(needs), 1)
    if bench.cuda and job.get("h2d", True) and not bench.budget.spent():
        result["h2d"] = measure_h2d(bench)
    else:
        result["h2d"] = None
        result["h2d_reason"] = "host-to-device copies are measured on CUDA only" if not bench.cuda \
            else "skipped (option or time budget)"
    return result
