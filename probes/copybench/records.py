"""The one constructor of each record copy_bench emits (a device, a workload, a sweep row), used on every path: ok,
skipped, timeout, error, time budget and no result alike, so every record carries every key its declaration
(declared.py) requires, whatever went wrong. What a unit of work costs is declared here too, so a record of work not
done says how long it would have needed.
"""

# What one unit costs, in seconds, before any was measured on the device (the device's own figures replace these
# as it goes): one workload (every strategy eagerly and inside a replayed graph), one size of the sweep (copy_() and
# the foreach kernel, both clocks), and starting the benchmark child (torch, CUDA context, sglang import).
CPU_UNIT_S = {"workload": 0.3, "sweep_row": 0.05}
GPU_UNIT_NAMES = {"workload": "workload on one GPU", "sweep_row": "sweep size on one GPU"}  # copy_bench.PROBE
BUDGET_SPENT = "time budget spent"
# A child's frame carrying one finished workload (its device's own frame comes once the device is done).
WORKLOAD_FRAME = "workload_done"


def marked_fields(specs, threshold_bytes):
    """A workload's fields as its record holds them: each spec with sglang's split (by name) and the size split."""
    from probes.copybench.strategies import split_marks
    marks = split_marks([f["name"] for f in specs], [f["bytes"] for f in specs], threshold_bytes)
    return [dict(f, **mark) for f, mark in zip(specs, marks)]


def unit_s(job, device, kind):
    """One unit's estimated cost: on a GPU as copy_bench's PROBE declares it (the host's runner reads the same
    figure; build_job hands it over as job["unit_s"]), on the CPU this module's own."""
    if device == "cpu":
        return CPU_UNIT_S[kind]
    return float(job["unit_s"][GPU_UNIT_NAMES[kind]])


def device_record(index, status, reason=None, name=None, **more):
    """A device's record: index (None for the CPU), name (None until the device was opened), status, and reason
    where the status is not ok."""
    out = {"index": index, "name": name, "status": status}
    if reason is not None or status != "ok":
        out["reason"] = str(reason or "no reason recorded")
    out.update(more)
    return out


def unmeasured_device(index, status, reason, needs_s=None, name=None):
    """A device with no measurement (timeout, error, no result, time budget): `needs_s` is the time its workloads and
    sweep would have taken, where it is known."""
    more = {"needs_s": round(float(needs_s), 1)} if needs_s is not None else {}
    return device_record(index, status, reason, name=name, **more)


def workload_frame(index, workload):
    """The frame a child streams as soon as a workload of device `index` is measured."""
    return {"index": index, WORKLOAD_FRAME: workload}


def cut_short_device(index, status, reason, kept, planned, needs_s=None, name=None):
    """A device whose benchmark stopped partway (timeout, hang, death): the workload records it streamed before,
    kept as the ok path stores them, and `cut_short`: how many were measured of how many planned and the time the
    rest would need."""
    measured = len([w for w in kept if w.get("status") == "ok"])
    rest = None if needs_s is None else round(float(needs_s), 1)
    more = {"needs_s": rest} if rest is not None else {}
    return device_record(index, status, reason, name=name, workloads=list(kept),
                         cut_short={"measured": measured, "planned": int(planned), "needs_s": rest}, **more)


def workload_record(name, path, batch_size, hidden_size, status, fields, reason=None, **more):
    """A workload's record: what it copies (`fields`) always; strategies, best and the saving when it ran."""
    out = {"name": name, "path": path, "batch_size": batch_size, "hidden_size": hidden_size, "status": status,
           "fields": list(fields)}
    if reason is not None or status != "ok":
        out["reason"] = str(reason or "no reason recorded")
    out.update(more)
    return out


def budget_skip(needs_s, left_s):
    """The reason a unit was not started: the time it needs and the time that was left."""
    return {"reason": BUDGET_SPENT, "needs_s": round(max(0.0, needs_s), 2), "left_s": round(max(0.0, left_s), 2)}


def sweep_row(size, copy=None, foreach=None, status=None, reason=None, **more):
    """One size of the sweep: copy_us / foreach_us (eager medians) and copy_graph_us / foreach_graph_us (inside a
    replayed graph) always present, None where not timed; `copy` and `foreach` keep the whole timings."""
    out = {"bytes": int(size), "copy_us": _median(copy), "foreach_us": _median(foreach),
           "copy_graph_us": _median((copy or {}).get("graph")), "foreach_graph_us": _median((foreach or {}).get("graph"))}
    if copy is not None:
        out["copy"] = copy
    if foreach is not None:
        out["foreach"] = foreach
    if status is not None:
        out["status"] = status
    if reason is not None:
        out["reason"] = str(reason)
    out.update(more)
    return out


def _median(timing):
    if not isinstance(timing, dict) or timing.get("status", "ok") != "ok":
        return None
    return timing.get("median_us")
