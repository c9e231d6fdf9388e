"""The time budget of one copy_bench run: a deadline, and what one unit of work (a workload, a sweep row) costs on
this device, so work that would not fit is reported as skipped with the time it needed rather than left half done.
"""
import time

from probes.copybench import records


class Budget(object):
    """A deadline on time.monotonic(); work past it is reported as skipped, not left half done."""

    def __init__(self, seconds):
        self.deadline = time.monotonic() + max(0.0, float(seconds))

    def left(self):
        return self.deadline - time.monotonic()

    def spent(self):
        return self.left() <= 0


class UnitClock(object):
    """What one unit of a kind costs on this device: the declared estimate until one was measured, then the
    mean of the measured ones. `fits` never refuses the first unit of a device while any time is left, so a
    short budget measures one workload rather than none."""

    def __init__(self, device, budget, job):
        self.device = device
        self.budget = budget
        self.job = job
        self.spent = {}
        self.started = 0

    def need(self, kind):
        done = self.spent.get(kind)
        return done[0] / done[1] if done else records.unit_s(self.job, self.device, kind)

    def fits(self, kind):
        left = self.budget.left()
        if left <= 0:
            return False
        return self.started == 0 or left >= self.need(kind)

    def skip(self, kind):
        return records.budget_skip(self.need(kind), self.budget.left())

    def timed(self, kind, run):
        start = time.monotonic()
        self.started += 1
        try:
            return run()
        finally:
            total, count = self.spent.get(kind, (0.0, 0))
            self.spent[kind] = (total + time.monotonic() - start, count + 1)
