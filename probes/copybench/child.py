"""The benchmark in a child process, so a CUDA fault, a crash in graph capture or a hung GPU cannot take
the probe runner down. The child streams one framed line per workload as soon as it is measured and one per device
once that device is done; the parent (a ChildSession of probes/child.py) keeps every line it got, blames a silent
device (`timeout`) or a dead child (`error`) on the first device without a result (keeping the workloads it
streamed, `cut_short`), and starts a fresh child for the devices left.
"""
import os
import time

from probes import events
from probes.child import DIED, TIMEOUT, ChildSession
from probes.child_side import FramedWriter, flush_std, watch_parent
from probes.copybench import records

MARK = "COPYBENCH-DEVICE "
# Past its share of the time, a device gets this much longer before the parent calls it hung: a workload
# in progress finishes past the budget, and the first device also pays for importing torch and sglang.
GRACE_S = 20.0
# The child's own budget ends this long before the parent's deadline, so its last line still arrives: at most
# CHILD_MARGIN_S, a fifth of the time there is when that is less (a short deadline still measures something).
CHILD_MARGIN_S = 8.0
MIN_MARGIN_S = 1.5


def margin_s(available):
    return min(CHILD_MARGIN_S, max(MIN_MARGIN_S, 0.2 * available))


def child_main(payload):
    """In the child: run the job, one framed line per device on the real stdout, noise on stderr."""
    watch_parent()   # a killed runner takes this child (and its GPU work) down with it
    job = payload["job"]
    from probes.copybench.devices import bench_all
    writer = FramedWriter(MARK)   # anything torch or sglang prints goes to stderr, not into the frames
    results = bench_all(job, emit=writer.write)
    flush_std()
    failed = results and results[-1].get("status") == "error" and len(results) < len(job.get("gpus") or [1])
    os._exit(3 if failed else 0)


def run_isolated(job, modules, deadline, python=None):
    """Run the job in children until every device has a result or time is up: [device results]."""
    targets = [None] if job["device"] == "cpu" else list(job["gpus"])
    results = DeviceSteps(targets)
    for _ in range(len(targets) + 1):
        remaining = [t for t in targets if _key(t) not in results]
        if not remaining:
            break
        left = deadline - time.monotonic()
        if left < margin_s(left) + 1.0:
            for t in remaining:
                results[_key(t)] = _unmeasured(job, t, "skipped", "%s: %.1f s left, too little to start a "
                                               "benchmark process" % (records.BUDGET_SPENT, max(0.0, left)))
            break
        _run_child(job, modules, deadline, python, remaining, results)
    return [results.get(_key(t)) or _unmeasured(job, t, "error", "no result") for t in targets]


def _unmeasured(job, index, status, reason):
    """A device's record on a path where it has no measurement, with the time it would have needed."""
    from probes.copybench.devices import device_needs_s, gpu_name
    return records.unmeasured_device(index, status, reason, needs_s=device_needs_s(job), name=gpu_name(job, index))


class DeviceSteps(dict):
    """Device results by key, reporting each device's progress (GPU i of N started, finished) as it goes."""

    def __init__(self, targets):
        dict.__init__(self)
        self.numbers = {_key(t): n for n, t in enumerate(targets, 1)}
        self.started = set()

    def start(self, index):
        key = _key(index)
        if key not in self.started and key not in self:
            self.started.add(key)
            events.emit("copy_bench", "device", "started", i=self.numbers.get(key), n=len(self.numbers),
                        what=_label(index))

    def __setitem__(self, key, result):
        dict.__setitem__(self, key, result)
        events.emit("copy_bench", "device", "finished", i=self.numbers.get(key), n=len(self.numbers),
                    what=_label(result.get("index")), status=result.get("status"))


def targets_of(job):
    return [None] if job["device"] == "cpu" else list(job["gpus"])


def _label(index):
    return "cpu" if index is None else "GPU %s" % index


def _run_child(job, modules, deadline, python, remaining, results):
    """One child for the `remaining` devices; every line it sends is kept in `results` as it arrives, and each
    workload streamed before its device's line in `kept`, so a device cut short keeps what it measured."""
    available = deadline - time.monotonic()
    budget = max(1.0, available - margin_s(available))
    # A wall-clock deadline, so the child's own start-up (torch, sglang imports) counts against it.
    # all_gpus: a restarted child keeps each GPU's place in the workload rotation (devices.rotated_grid).
    sub = dict(job, gpus=[t for t in remaining if t is not None], budget_s=budget,
               all_gpus=job.get("all_gpus") or [t for t in targets_of(job) if t is not None],
               deadline_epoch=time.time() + budget)
    child_deadline = time.monotonic() + budget
    # GPUs numbered as nvidia-smi numbers them (PCI bus order), as the probe's GPU indices are.
    session = ChildSession(python, "probes.copybench.child:child_main", modules, MARK, payload_fields={"job": sub},
                           close_stdin=True, env=dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID"))
    kept, current = {}, None
    try:
        while True:
            waiting = [t for t in remaining if _key(t) not in results]
            if not waiting:
                break
            if _key(waiting[0]) != current:   # a device starts: its own limit, whatever frames come meanwhile
                results.start(waiting[0])
                now = time.monotonic()
                share = max(0.0, child_deadline - now) / len(waiting)   # as the child's bench_all divides it
                current, until = _key(waiting[0]), min(now + share + GRACE_S, deadline - 1.0)
            got = session.next(until - time.monotonic())
            if got.kind == TIMEOUT:
                results[current] = _cut_short(
                    job, waiting[0], "timeout",
                    "no result within %.0f s (its share of the time and %.0f s grace): the benchmark process was "
                    "killed and the devices after it get a new one" % (share, GRACE_S), kept.get(current))
                return
            if got.kind == DIED:
                _blame_death(job, got, session.stderr.last(3), waiting, results, kept.get(current))
                return
            if records.WORKLOAD_FRAME in got.frame:
                kept.setdefault(_key(got.frame.get("index")), []).append(got.frame[records.WORKLOAD_FRAME])
                continue
            results[_key(got.frame.get("index"))] = got.frame
    finally:
        session.kill()


def _blame_death(job, ended, tail, waiting, results, kept):
    if ended.exit_code in (0, 3):
        return   # 3: the child stopped on purpose after a CUDA fault it already reported
    # The child died or was killed: the first device without a result is the one it was on.
    results[_key(waiting[0])] = _cut_short(job, waiting[0], "error", "benchmark process failed: %s%s"
                                           % (ended.how(), "; " + " | ".join(tail) if tail else ""), kept)


def _cut_short(job, index, status, reason, kept):
    """A device the child never finished: the workloads it streamed before (if any) and what the rest needs."""
    if not kept:
        return _unmeasured(job, index, status, reason)
    from probes.copybench.devices import device_needs_s, gpu_name, planned_workloads
    planned = max(planned_workloads(job) or 0, len(kept))
    measured = len([w for w in kept if w.get("status") == "ok"])
    needs = device_needs_s(job, done=measured)
    rest = "; the other %d workloads and the sweep need about %.0f s" % (planned - measured, needs) \
        if needs is not None else ""
    reason = "%s; cut short after %d of %d workloads measured%s" % (reason, measured, planned, rest)
    return records.cut_short_device(index, status, reason, kept, planned, needs_s=needs, name=gpu_name(job, index))


def _key(index):
    return "cpu" if index is None else str(index)
