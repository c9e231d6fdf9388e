"""How fast and how big the crash-log classifier runs on a stress log, against a baseline release of itself,
side by side in one run.

    python benchmarks/crashlog_stress.py [--ref main] [--mb 100] [--tracebacks 10000] [--repeat 3]

Writes a log of --mb megabytes under a docker compose prefix (serving lines and NCCL_DEBUG lines, with
--tracebacks corpus crashes spread through it, each followed by a restart: capture, its progress bars, the
server up), then classifies its last 8 MiB (what
`repro --log` and a scan read) with this tree's classifier and with the one at git --ref, each in a child
process of its own: wall and CPU time (medians of --repeat; CPU time is the steadier on a shared machine)
and peak resident memory. Prints both and the ratios.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "logs", "corpus")
TAIL = 8 * 1024 * 1024
CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from probes.crashlog.classify import classify
with open(sys.argv[2], "rb") as fh:
    fh.seek(-min(%d, fh.seek(0, 2)), 2)
    text = fh.read().decode("utf-8", "replace")
start, cpu = time.perf_counter(), time.process_time()
result = classify(text)
took, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": took, "cpu_seconds": cpu, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "outcome": result["outcome"], "crashes": result["crashes_total"]}))
""" % TAIL


def corpus_crashes():
    out = []
    for name in sorted(os.listdir(CORPUS)):
        if name.endswith(".log") and not name.startswith("clean_"):
            with open(os.path.join(CORPUS, name), encoding="utf-8") as fh:
                out.append([ln for ln in fh.read().splitlines() if not ln.startswith("#fixture ")])
    return out


def write_log(path, megabytes, tracebacks, seed=0):
    rng = random.Random(seed)
    crashes = corpus_crashes()
    serving = ["[2026-05-06 03:01:10 TP0] Decode batch. #running-req: 8, #token: 6042, token usage: 0.01, accept len: "
               "2.95, cuda graph: True, gen throughput (token/s): 910.22, #queue-req: 0",
               "node-1:190:3197 [2] NCCL INFO Channel 15/0 : 4[4] -> 5[5] via P2P/IPC",
               '[2026-05-06 03:01:11] INFO:     127.0.0.1:50812 - "POST /generate HTTP/1.1" 200 OK']
    # Each crash is followed by a restart: capture with its progress bars, then the server up.
    restart = ["[2026-05-06 03:00:20 TP0] Capture cuda graph begin. This can take up to several minutes."] + \
              ["Capturing batches (bs=%d avail_mem=8.29 GB):  %d%%|#7   | %d/23\rCapturing batches (bs=%d avail_mem=8.2"
               " GB): %d%%|###| %d/23" % (160 - i, 4 * i, i, 159 - i, 4 * i + 4, i + 1) for i in range(23)] + \
              ["[2026-05-06 03:00:41 TP0] Capture cuda graph end. Time elapsed: 22.10 s. mem usage=2.41 GB.",
               "[2026-05-06 03:00:44] The server is fired up and ready to roll!"]
    target = megabytes * 1024 * 1024
    every = max(1, target // max(1, tracebacks) // 200)      # serving lines between crashes (about 200 B each)
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < target:
            block = [rng.choice(serving) for _ in range(every)] + rng.choice(crashes) + restart
            text = "".join("llm0-1  | " + ln + "\n" for ln in block)
            fh.write(text)
            written += len(text)


def baseline_tree(ref, into):
    """The probes/crashlog package (and probes/__init__.py) at git `ref`, extracted into `into`."""
    names = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", ref, "probes/crashlog/"],
                           capture_output=True, text=True, check=True).stdout.split()
    os.makedirs(os.path.join(into, "probes", "crashlog"))
    for name in names + ["probes/__init__.py"]:
        data = subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (ref, name)], capture_output=True, check=True).stdout
        with open(os.path.join(into, name), "wb") as fh:
            fh.write(data)
    return into


def run(tree, log, repeat):
    samples = [json.loads(subprocess.run([sys.executable, "-c", CHILD, tree, log], capture_output=True, text=True,
                                         check=True).stdout) for _ in range(repeat)]
    return {"seconds": statistics.median(s["seconds"] for s in samples),
            "cpu_seconds": statistics.median(s["cpu_seconds"] for s in samples),
            "peak_kib": max(s["peak_kib"] for s in samples), "outcome": samples[0]["outcome"],
            "crashes": samples[0]["crashes"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="main")
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--tracebacks", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        log = os.path.join(work, "stress.log")
        write_log(log, args.mb, args.tracebacks)
        base = run(baseline_tree(args.ref, os.path.join(work, "base")), log, args.repeat)
        this = run(ROOT, log, args.repeat)
    for name, got in (("baseline (%s)" % args.ref, base), ("this tree", this)):
        print("%-16s %6.2f s (CPU %5.2f s)  peak %7.1f MiB  %s, %d crashes" % (
            name, got["seconds"], got["cpu_seconds"], got["peak_kib"] / 1024, got["outcome"], got["crashes"]))
    print("ratio (this / baseline): time %.2f, CPU time %.2f, peak memory %.2f" % (
        this["seconds"] / base["seconds"], this["cpu_seconds"] / base["cpu_seconds"],
        this["peak_kib"] / base["peak_kib"]))


if __name__ == "__main__":
    main()
