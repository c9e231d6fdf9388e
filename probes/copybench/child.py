"""The benchmark in a child process, so a CUDA fault or a crash in graph capture cannot take the probe
runner down. The child streams one framed line per device; the parent restarts it for devices not done.
"""
import json
import os
import sys
import time

from probes.context import run_command

MARK = "COPYBENCH-DEVICE "
# Runs as `PYTHON -I -c BOOTSTRAP` with {modules|root, job} on stdin; the probe code comes from the same
# in-memory modules the runner got (or from the package directory when run from a checkout).
BOOTSTRAP = r'''import sys, json, importlib.abc, importlib.util
P = json.loads(sys.stdin.buffer.read().decode("utf-8"))
M = P.get("modules") or {}
class F(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name in M:
            return importlib.util.spec_from_loader(name, self, is_package=M[name][0])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        is_pkg, src = M[module.__name__]
        if is_pkg:
            module.__path__ = []
        exec(compile(src, "<gpudiag>/" + module.__name__.replace(".", "/") + ".py", "exec"), module.__dict__)
if M:
    sys.meta_path.insert(0, F())
elif P.get("root"):
    sys.path.insert(0, P["root"])
import probes.copybench.child
probes.copybench.child.child_main(P["job"])
'''


def child_main(job):
    """In the child: run the job, one framed line per device on the real stdout, noise on stderr."""
    from probes.copybench.devices import bench_all
    sys.stdout.flush()
    frame_fd = os.dup(1)
    os.dup2(2, 1)   # anything torch or sglang prints goes to stderr, not into the frames

    def emit(result):
        line = (MARK + json.dumps(result, default=str, sort_keys=True) + "\n").encode("utf-8")
        while line:
            line = line[os.write(frame_fd, line):]

    results = bench_all(job, emit=emit)
    sys.stdout.flush()
    sys.stderr.flush()
    failed = results and results[-1].get("status") == "error" and len(results) < len(job.get("gpus") or [1])
    os._exit(3 if failed else 0)


def parse_lines(stdout):
    """The device results the child framed, in order; anything else in the output is ignored."""
    found = []
    for line in (stdout or "").splitlines():
        if line.startswith(MARK):
            try:
                found.append(json.loads(line[len(MARK):]))
            except ValueError:
                continue
    return found


def _payload(job, modules):
    doc = {"job": job}
    if modules:
        doc["modules"] = {k: list(v) for k, v in modules.items()}
    else:
        import probes
        doc["root"] = os.path.dirname(os.path.dirname(os.path.abspath(probes.__file__)))
    return json.dumps(doc).encode("utf-8")


def run_isolated(job, modules, deadline, python=None):
    """Run the job in children until every device has a result or time is up: [device results]."""
    targets = [None] if job["device"] == "cpu" else list(job["gpus"])
    results, attempts = {}, 0
    while attempts < len(targets) + 1:
        remaining = [t for t in targets if _key(t) not in results]
        left = deadline - time.monotonic()
        if not remaining:
            break
        if left < 5:
            for t in remaining:
                results[_key(t)] = {"index": t, "status": "skipped", "reason": "time budget spent"}
            break
        attempts += 1
        # A wall-clock deadline, so the child's own start-up (torch, sglang imports) counts against it.
        sub = dict(job, gpus=[t for t in remaining if t is not None], budget_s=max(1.0, left - 8.0),
                   deadline_epoch=time.time() + max(1.0, left - 8.0))
        outcome = run_command([python or sys.executable, "-I", "-c", BOOTSTRAP], timeout=left - 1.0,
                              input_bytes=_payload(sub, modules))
        got = parse_lines(outcome["stdout"])
        for item in got:
            results[_key(item.get("index"))] = item
        if outcome["ok"] or outcome["exit_code"] == 3:
            continue   # 3: the child stopped on purpose after a CUDA fault it already reported
        # The child died or was killed: the first device without a result is the one it was on.
        tail = (outcome["stderr"] or "").strip().splitlines()[-3:]
        still = [t for t in remaining if _key(t) not in results]
        if still:
            results[_key(still[0])] = {"index": still[0], "status": "error",
                                       "reason": "benchmark process failed: %s%s"
                                                 % (outcome["error"], "; " + " | ".join(tail) if tail else "")}
    return [results.get(_key(t), {"index": t, "status": "error", "reason": "no result"}) for t in targets]


def _key(index):
    return "cpu" if index is None else str(index)
