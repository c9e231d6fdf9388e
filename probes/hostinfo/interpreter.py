"""The Python whose torch the probes should describe (the live server's, as deployment chooses it), and a
child process that runs a probe function under it and answers with one framed JSON line on stdout.
"""
import json
import os
import sys
import time

from probes.boot import child_argv, child_payload
from probes.context import Skip, run_command

MARK = "GPUDIAG-CHILD "
STARTUP_MARGIN_S = 5.0


def target(ctx):
    """{path, why}: deployment's choice when it already ran, else the same choice made here (a probe run
    without it, e.g. from an older bundle)."""
    chosen = (ctx.results.get("deployment") or {}).get("interpreter")
    if not chosen:
        from probes import deployment  # lazily: deployment reads /proc, which only this path needs
        proc_root = (ctx.option("deployment", {}) or {}).get("proc_root", "/proc")
        servers, _ = deployment.find_servers(proc_root)
        chosen = deployment.choose_interpreter(ctx.options, servers)
    return {"path": chosen.get("path"), "why": chosen.get("why") or "default"}


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


def run_child(python, entry, modules, timeout, **fields):
    """(data, None) from `entry` run under `python`, or (None, why it gave nothing)."""
    outcome = run_command(child_argv(python), timeout=timeout,
                          input_bytes=child_payload(entry, modules, budget_s=max(1.0, timeout - STARTUP_MARGIN_S),
                                                    **fields))
    answer = parse_answer(outcome["stdout"])
    if answer is None:
        tail = (outcome["stderr"] or "").strip().splitlines()[-2:]
        why = outcome["error"] or "exit %s without an answer" % outcome["exit_code"]
        return None, "%s: %s%s" % (python, why, " | " + " | ".join(tail) if tail else "")
    if not answer.get("ok"):
        return None, "%s: %s" % (python, answer.get("reason") or "failed")
    return answer.get("data"), None


def parse_answer(stdout):
    """The child's framed answer {ok, data|reason}, or None when it printed none (crashed, killed)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARK):
            try:
                answer = json.loads(line[len(MARK):])
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None


def answer(compute):
    """In the child: run `compute()` and write its framed result on the real stdout; anything torch prints
    goes to stderr. Ends the process at once (CUDA teardown can hang or crash after the answer)."""
    sys.stdout.flush()
    frame_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        document = {"ok": True, "data": compute()}
    except Skip as exc:
        document = {"ok": False, "reason": "skipped: %s" % exc}
    except BaseException as exc:  # a broken install can raise anything, SystemExit included
        document = {"ok": False, "reason": "%s: %s" % (type(exc).__name__, str(exc)[:500])}
    line = (MARK + json.dumps(document, default=str, sort_keys=True) + "\n").encode("utf-8")
    while line:
        line = line[os.write(frame_fd, line):]
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(0)


def child_deadline(payload):
    return time.monotonic() + float(payload.get("budget_s") or 60.0)
