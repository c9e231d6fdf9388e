"""The benchmark in a child process, so a CUDA fault or a crash in graph capture cannot take the probe
runner down. The child streams one framed line per device; the parent restarts it for devices not done.
"""
import json
import os
import sys
import time

from probes.boot import child_argv, child_payload
from probes.context import run_command

MARK = "COPYBENCH-DEVICE "
def child_main(payload):
    """In the child: run the job, one framed line per device on the real stdout, noise on stderr."""
    job = payload["job"]
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
        outcome = run_command(child_argv(python), timeout=left - 1.0,
                              input_bytes=child_payload("probes.copybench.child:child_main", modules, job=sub))
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
