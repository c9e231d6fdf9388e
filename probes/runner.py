"""Runs the selected probes, each under its own time limit, and prints one framed JSON document.

A probe never takes the runner down: every exception, hang or skip becomes data. While probes run,
file descriptor 1 points at stderr, so nothing a probe or a C library prints can corrupt the frame.
"""
import importlib
import json
import os
import platform
import socket
import sys
import threading
import time
import traceback

from probes import child, events, timeshare
from probes.stop_watch import StopWatch, detach_stdin
from probes.catalog import ALL_PROBES, DEEP_PROBES, LIGHT_PROBES, plan, with_needs  # noqa: F401
from probes.catalog import declarations, timeouts as declared_limits
from probes.context import ProbeContext, Skip

SCHEMA = 1
DEFAULT_PROBE_TIMEOUT = 120.0
MIN_PYTHON = (3, 9)
REAP_S = 5.0   # how long children get to exit once the frame is written, before their groups are killed


def error_data(exc, frames=6):
    """An exception as data: type, message and the last frames of its traceback."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    lines = "".join(tb).rstrip().splitlines()
    return {"type": type(exc).__name__, "message": str(exc)[:2000], "traceback": lines[-(frames * 2 + 1):]}


def run_probe(name, options, results, timeout, modules=None):
    """Run one probe in a daemon thread; return its result dict, whatever happens inside."""
    started = time.monotonic()
    outcome = {}

    def target():
        try:
            module = importlib.import_module("probes." + name)
            ctx = ProbeContext(options=options, results=results, deadline=started + timeout, modules=modules)
            outcome["data"] = module.collect(ctx)
        except Skip as exc:
            outcome["skip"] = str(exc) or "skipped"
        except BaseException as exc:  # a probe may raise anything, SystemExit included
            outcome["error"] = error_data(exc)

    thread = threading.Thread(target=target, name="probe-" + name, daemon=True)
    thread.start()
    thread.join(timeout)
    duration = round(time.monotonic() - started, 4)
    if thread.is_alive():
        return {"status": "timeout", "duration_s": duration,
                "reason": "probe %s did not finish within %.0f s" % (name, timeout)}
    if "skip" in outcome:
        return {"status": "skipped", "duration_s": duration, "reason": outcome["skip"]}
    if "error" in outcome:
        return {"status": "error", "duration_s": duration, "error": outcome["error"]}
    return {"status": "ok", "duration_s": duration, "data": outcome.get("data")}


def select_probes(requested, modules=None):
    """Requested names and what they read from, in run order; unknown names are reported, not fatal.
    The bundle's modules add the probes declared in them (probes/catalog.py)."""
    return plan(requested, modules)


def limits_for(probes, payload):
    """({long probe: its limit}, {probe: smallest unit s}, the limit of the others): the declared limits
    (PROBE["timeout_s"], in a bundle's modules too), unless --probe-timeout set one limit for all; a limit the
    control side names for a probe (`timeouts`) overrides its declaration."""
    declared = declarations(payload.get("modules"))
    fallback = float(payload.get("probe_timeout") or DEFAULT_PROBE_TIMEOUT)
    limits = {} if payload.get("probe_timeout") else declared_limits(declared)
    limits.update((name, float(value)) for name, value in (payload.get("timeouts") or {}).items()
                  if isinstance(value, (int, float)))
    return ({n: v for n, v in limits.items() if n in probes}, timeshare.smallest_units(declared), fallback)


def run_all(payload):
    """The whole document for one host."""
    probes, unknown = select_probes(payload.get("probes"), payload.get("modules"))
    limits, units, fallback = limits_for(probes, payload)
    options = payload.get("options") or {}
    modules = payload.get("modules")
    results = {}
    document_probes = {}
    # The control side's deadline for the whole host: each probe's limit is decided as it starts, from the
    # time left then (probes/timeshare.py), so a probe is cut short rather than let the host's deadline kill
    # the runner and lose every finished probe with it, and what one leaves unused goes to the next.
    budget = payload.get("budget_s")
    ends = time.monotonic() + float(budget) if budget else None
    for number, name in enumerate(probes, 1):
        left = None if ends is None else ends - time.monotonic()
        declared = limits.get(name, fallback)
        if left is not None and left < timeshare.LAST_CALL_S:
            document_probes[name] = {"status": "skipped", "duration_s": 0.0, "limit_s": 0.0,
                                     "declared_s": declared,
                                     "reason": "the host's deadline left no time for this probe"}
            continue
        timeout = timeshare.limit_now(name, left, probes[number:], limits, units, fallback)
        given = "given %.0f s of its %.0f s" % (timeout, declared) if timeout < declared - 0.5 else None
        events.emit(name, "probe", "started", i=number, n=len(probes), what=given)
        result = run_probe(name, options, results, timeout, modules)
        events.emit(name, "probe", "finished", i=number, n=len(probes), status=result["status"],
                    duration_s=result["duration_s"])
        result["limit_s"], result["declared_s"] = round(timeout, 1), declared
        document_probes[name] = result
        if result["status"] == "ok":
            results[name] = result["data"]
    for name in unknown:
        document_probes[name] = {"status": "skipped", "duration_s": 0.0,
                                 "reason": "no probe named %r in this bundle" % name}
    return {
        "schema": SCHEMA,
        "host": payload.get("host") or socket.gethostname(),
        "hostname": socket.gethostname(),
        "python": {"executable": sys.executable, "version": platform.python_version(),
                   "implementation": platform.python_implementation()},
        "probes": document_probes,
        "budget_s": budget,
    }


def frame_lines(text, width):
    """The JSON text cut into lines of about `width` characters (0: one line). A cut never falls right after
    a space, which a relaying tool could strip; joining the lines gives the JSON back."""
    if width <= 0:
        return [text]
    lines, start = [], 0
    while start < len(text):
        end = min(start + width, len(text))
        while end < len(text) and text[end - 1] == " ":
            end += 1
        lines.append(text[start:end])
        start = end
    return lines


def write_frame(document, nonce, fd, width=0):
    text = json.dumps(document, default=str, sort_keys=True)
    frame = "\nGPUDIAG-BEGIN %s\n%s\nGPUDIAG-END %s\n" % (nonce, "\n".join(frame_lines(text, width)), nonce)
    data = frame.encode("utf-8")
    while data:
        written = os.write(fd, data)
        data = data[written:]


def main(payload):
    """Entry point used by the bootstrap: run, frame, return the exit code."""
    nonce = str(payload.get("nonce") or "0")
    begun = time.monotonic()
    if sys.version_info < MIN_PYTHON:
        document = {"schema": SCHEMA, "fatal": "python %s is older than 3.9" % platform.python_version(),
                    "python": {"executable": sys.executable, "version": platform.python_version()},
                    "probes": {}}
        write_frame(document, nonce, 1)
        return 0
    sys.stdout.flush()
    frame_fd = os.dup(1)
    os.dup2(2, 1)  # from here on, fd 1 is stderr: stray prints cannot break the frame
    events.open_stream(nonce, 2)   # progress lines on stderr, read by the control side as they come
    events.announce_process("runner")   # first thing on stderr: a kill can be looked up by this pid
    # Nobody reading the output any more (a stopped scan closed the session), SIGTERM or SIGHUP: the
    # children and the runner end at once instead of running on with nobody to answer. Inside a container the
    # shim holds the output pipes open, so the control side keeps stdin open instead, and its end says the same.
    watch = StopWatch([frame_fd, 2], detach_stdin() if payload.get("watch_stdin") else None).start()
    try:
        document = run_all(payload)
    except BaseException as exc:
        document = {"schema": SCHEMA, "fatal": "runner failed", "error": error_data(exc), "probes": {}}
    events.close_stream()   # a probe thread left running after its timeout stays silent from here on
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    watch.hold_if_ending()
    # Engines such as pdsh cut long lines: a bundle run asks for wrapped JSON lines (ingest joins them).
    reap_s = REAP_S
    try:
        write_frame(document, nonce, frame_fd, int(payload.get("line_width") or 0))
    except OSError:
        reap_s = 0.0   # nobody reads any more (the session was closed): the children end now, not in REAP_S
    watch.stop()
    os.close(frame_fd)
    # Children (the torch child, a GPU worker) end before the runner, within the host's deadline.
    budget = float(payload.get("budget_s") or 0) or None
    child.reap_all(min(reap_s, budget - (time.monotonic() - begun)) if budget else reap_s)
    # Hung probe threads (timed out) must not keep the process alive.
    os._exit(0)
