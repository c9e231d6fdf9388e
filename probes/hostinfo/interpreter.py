"""The one interpreter choice per host: an explicit `--python`, else the live server's, else the probing
Python. Made once (by deployment, or here when deployment did not run), recorded with its reason, and used
by every probe that imports torch or touches a GPU: their torch work runs in a child of that interpreter,
so the probes' own process stays stdlib-only.
"""
import os
import sys
import time

import probes.child as child
import probes.child_side as child_side
from probes.context import Skip, which
from probes.schemas import obj, s

# The record every probe that ran torch keeps of it (env.torch.interpreter, torch_caps.interpreter).
RECORD = obj({"path": s("the Python that ran the work"),
              "why": s("default | live_server | explicit | fallback"),
              "ran": s("here | child").opt(), "reason": s().null().opt()},
             "which interpreter ran torch and why")

MARK = "GPUDIAG-CHILD "
STARTUP_MARGIN_S = 5.0
WHY_TEXT = {"explicit": "given with --python", "live_server": "the live sglang server's interpreter",
            "default": "no --python and no usable live server: the probing Python"}


def choose(options, servers):
    """{path, why: explicit|live_server|default, reason, ...}: the Python whose torch and sglang the probes
    describe. With several live servers under different Pythons the lowest pid's wins; every one is listed
    in `candidates` (with the servers that use it) so facts can say which server they describe."""
    requested = options.get("python")
    usable = [s for s in servers if s.get("python") and s.get("python_exists") and s.get("same_root") is not False]
    by_python = {}
    for server in sorted(usable, key=lambda s: s.get("pid") or 0):
        by_python.setdefault(server["python"], []).append(server.get("pid"))
    candidates = sorted(by_python, key=lambda path: by_python[path][0])
    base = {"requested": requested, "candidates": candidates, "servers_by_python": by_python}
    if options.get("python_explicit") and requested:
        path = explicit_path(requested)
        others = [c for c in candidates if not _same_python(c, path)]
        chosen = dict(base, path=path, why="explicit")
        if others:
            chosen["differs_from_live"] = others
            chosen["note"] = ("--python %s is not the live server's interpreter (%s): torch facts describe "
                              "--python; each server's own interpreter is listed" % (path, ", ".join(others)))
        return _with_reason(chosen)
    if candidates:
        chosen = dict(base, path=candidates[0], why="live_server", pid=by_python[candidates[0]][0])
        if len(candidates) > 1:
            chosen["note"] = "%d live servers use different interpreters; torch work runs under pid %s's" % (
                len(candidates), chosen["pid"])
        return _with_reason(chosen)
    chosen = dict(base, path=sys.executable or requested or "python3", why="default")
    if servers:
        chosen["note"] = "a server runs, but its interpreter is not usable from here (another container or vanished)"
    return _with_reason(chosen)


def explicit_path(requested):
    """An explicit interpreter as a path: absolute as given, a bare name found on PATH, else as given (the
    child then fails to start and says so, naming it)."""
    if os.path.isabs(requested) or os.sep in requested:
        return requested
    return which(requested) or requested


def _same_python(a, b):
    return os.path.abspath(a) == os.path.abspath(b)


def _with_reason(chosen):
    chosen["reason"] = WHY_TEXT[chosen["why"]]
    return chosen


def target(ctx):
    """The host's choice: deployment's when it already ran, else the same choice made here (a probe run
    without it, e.g. from an older bundle)."""
    chosen = (ctx.results.get("deployment") or {}).get("interpreter")
    if not chosen:
        from probes.hostinfo import processes  # lazily: reading /proc is only this path's need

        servers, _ = processes.find_servers(processes.proc_root_of(ctx))
        chosen = choose(ctx.options, servers)
    return dict(chosen, why=chosen.get("why") or "default")


def chosen_server(results):
    """The live server whose interpreter was chosen (the one the torch facts describe), else the first one
    under the same Python, else the first server; None without servers."""
    deployment = (results or {}).get("deployment") or {}
    servers = [s for s in deployment.get("servers") or [] if isinstance(s, dict)]
    chosen = deployment.get("interpreter") or {}
    for match in (lambda s: chosen.get("pid") is not None and s.get("pid") == chosen.get("pid"),
                  lambda s: s.get("python") == chosen.get("path"), lambda s: True):
        found = [s for s in servers if match(s)]
        if found:
            return found[0]
    return None


def summary(chosen):
    """What a probe records about where its torch work ran."""
    return {key: chosen.get(key) for key in ("path", "why", "reason", "pid", "note") if chosen.get(key) is not None}


def _venv_of(python):
    """The venv folder of a python path (pyvenv.cfg beside its bin/), else None: a venv's python is a symlink to
    the base interpreter, yet sees other packages."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return os.path.realpath(folder) if os.path.isfile(os.path.join(folder, "pyvenv.cfg")) else None


def is_other(python):
    """True when `python` exists and would see other packages than the interpreter running this code."""
    if not python or not os.path.isabs(python) or not os.access(python, os.X_OK):
        return False
    ours = sys.executable or ""
    if os.path.abspath(python) == os.path.abspath(ours):
        return False
    if os.path.realpath(python) != os.path.realpath(ours):
        return True
    # The same binary: /usr/bin/python3 and /usr/bin/python3.10 are one Python; a venv's link to it is not.
    our_venv = os.path.realpath(sys.prefix) if sys.prefix != getattr(sys, "base_prefix", sys.prefix) else None
    return _venv_of(python) != our_venv


def _run(python, entry, modules, timeout, env=None, **fields):
    answer_doc, why = child.run_once(python, entry, modules, timeout, MARK, env=env,
                                     budget_s=max(1.0, timeout - STARTUP_MARGIN_S), **fields)
    if answer_doc is None:
        return None, why
    if not answer_doc.get("ok"):
        return None, answer_doc.get("reason") or "failed"
    return answer_doc.get("data"), None


def torch_child(ctx, entry, timeout, env=None, **fields):
    """(data, chosen) from `entry` run under the host's chosen interpreter; a Skip naming that interpreter
    and why it was chosen when it gave nothing (missing, crashed, hung, no torch)."""
    chosen = target(ctx)
    data, why = _run(chosen["path"], entry, ctx.modules, timeout, env=env, **fields)
    if why is not None:
        raise Skip("under %s (%s): %s" % (chosen["path"], chosen.get("reason") or chosen["why"], why))
    return data, chosen


def answer(compute):
    """In the child: run `compute()` and write its framed result on the real stdout; anything torch prints
    goes to stderr. Ends the process at once (CUDA teardown can hang or crash after the answer)."""
    child_side.watch_parent()
    writer = child_side.FramedWriter(MARK)
    try:
        document = {"ok": True, "data": compute()}
    except Skip as exc:
        document = {"ok": False, "reason": "skipped: %s" % exc}
    except BaseException as exc:  # a broken install can raise anything, SystemExit included
        document = {"ok": False, "reason": "%s: %s" % (type(exc).__name__, str(exc)[:500])}
    writer.write(document)
    child_side.flush_std()
    os._exit(0)


def child_deadline(payload):
    return time.monotonic() + float(payload.get("budget_s") or 60.0)
