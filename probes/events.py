"""Progress events from the host while probes run: one short line per step, never inside the frame.

The runner writes `GPUDIAG-EVENT <nonce> {json}` lines on its original stderr, which the control side reads
as it arrives (the framed document stays alone on stdout). A child running probe code has neither the nonce
nor the runner's stderr: its events travel to its parent as `GPUDIAG-CHILD-EVENT {json}` lines through the
child's framed writer (probes/child.py), and the parent's reader hands them to `forward`.
Events stop before the frame is written, so a probe thread still running after its timeout cannot write
next to it. Standard library only; emitting never raises.
"""
import json
import os
import threading
import time

MARK = "GPUDIAG-EVENT "
PROCESS_MARK = "GPUDIAG-PROCESS "  # a process of the run named by pid (announce_process)
CHILD_MARK = "GPUDIAG-CHILD-EVENT "
MAX_TEXT = 120      # characters of one string field
MAX_LINE = 1024     # bytes of one event line, mark and nonce included
STEPS = ("probe", "device", "cell", "launch", "level")
STATES = ("started", "finished")

_lock = threading.Lock()
_sink = {"fd": None, "prefix": b"", "writer": None, "nonce": ""}


def open_stream(nonce, fd=2):
    """In the runner: events go to `fd` (the original stderr), each line tagged with the run's nonce."""
    with _lock:
        _sink.update(fd=fd, prefix=("%s%s " % (MARK, nonce)).encode("utf-8"), writer=None, nonce=nonce)


def close_stream():
    """No more events from this process (the frame is about to be written)."""
    with _lock:
        _sink.update(fd=None, writer=None)


def relay_through(writer):
    """In a child: events go to the parent through `writer.write_marked(CHILD_MARK, event)`."""
    with _lock:
        _sink.update(fd=None, writer=writer)


def event(probe, step, state, i=None, n=None, what=None, status=None, duration_s=None):
    """One event as a bounded dict: strings cut to MAX_TEXT, numbers kept only when they are numbers."""
    doc = {"probe": _text(probe), "step": _text(step), "state": _text(state)}
    for key, value in (("i", i), ("n", n)):
        if isinstance(value, int) and not isinstance(value, bool):
            doc[key] = value
    if isinstance(duration_s, (int, float)) and not isinstance(duration_s, bool):
        doc["duration_s"] = round(float(duration_s), 3)
    for key, value in (("what", what), ("status", status)):
        if value is not None:
            doc[key] = _text(value)
    return doc


def emit(probe, step, state, **fields):
    """Report one step (a probe, a GPU, a repro cell or launch) starting or finishing."""
    try:
        doc = event(probe, step, state, **fields)
        with _lock:
            if _sink["writer"] is not None:
                _sink["writer"].write_marked(CHILD_MARK, doc)
            elif _sink["fd"] is not None:
                _write_line(_sink["fd"], _sink["prefix"], doc)
    except Exception:
        pass   # progress is a courtesy: it never costs a probe its result


def announce_process(role, pid=None):
    """In the runner: name a process of this run on its stderr (`GPUDIAG-PROCESS <nonce> {json}`), its pid and
    when it started on CLOCK_MONOTONIC, the clock the kernel stamps its log with. After a SIGKILL the control
    side looks for these pids among the OOM killer's records (probes/kernel_log.py). Never raises."""
    try:
        doc = {"pid": int(pid or os.getpid()), "role": _text(role), "clock_s": round(time.monotonic(), 3)}
        with _lock:
            if _sink["fd"] is not None:
                prefix = ("%s%s " % (PROCESS_MARK, _sink["nonce"])).encode("utf-8")
                _write_line(_sink["fd"], prefix, doc)
    except Exception:
        pass


def forward(line):
    """In a parent: re-emit a child's event line; True when the line was one (the caller drops it)."""
    if not line.startswith(CHILD_MARK):
        return False
    try:
        doc = json.loads(line[len(CHILD_MARK):][:MAX_LINE])
    except ValueError:
        return True
    if isinstance(doc, dict) and doc.get("probe") and doc.get("step") in STEPS and doc.get("state") in STATES:
        fields = {k: doc.get(k) for k in ("i", "n", "what", "status", "duration_s")}
        emit(doc["probe"], doc["step"], doc["state"], **fields)
    return True


def _text(value):
    text = str(value).replace("\n", " ").replace("\r", " ")
    return text[:MAX_TEXT]


def _write_line(fd, prefix, doc):
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    line = prefix + body.encode("utf-8") + b"\n"
    if len(line) > MAX_LINE:   # cannot happen with capped fields and a short nonce; never send one
        return
    while line:
        line = line[os.write(fd, line):]


class NumberedSteps(object):
    """Steps of one kind numbered as they run (repro cell k of at most K): `wrap(work, describe)` gives a
    function that reports its call starting and finishing, with the `status` of the dict it returns."""

    def __init__(self, probe, step, planned):
        self.probe, self.step, self.planned = probe, step, planned
        self.count = 0

    def wrap(self, work, describe):
        def reported(*args):
            self.count += 1
            number, what = self.count, describe(*args)
            emit(self.probe, self.step, "started", i=number, n=self.planned, what=what)
            outcome = work(*args)
            status = outcome.get("status") if isinstance(outcome, dict) else _launch_status(outcome)
            emit(self.probe, self.step, "finished", i=number, n=self.planned, what=what, status=status)
            return outcome
        return reported


def _launch_status(cells):
    """One launch's cells (a list): the first failure's status, else ok, skipped or unknown."""
    statuses = [c.get("status") for c in cells or () if isinstance(c, dict)]
    failing = [s for s in statuses if s not in ("ok", "skipped")]
    if failing:
        return failing[0]
    return "ok" if "ok" in statuses else (statuses[0] if statuses else "unknown")
