"""The one-screen summary of scripts/gpu-check.sh: each step's time and outcome, then the figures it left in
$OUT (the fast tests' counts, the user's path, copy_bench per GPU, the synthetic repro's boundaries, the sglang
cells) and what each step's figure check found (scripts/gpu_check_figures.py). Exit 1 when a step failed, ran
past its limit or left its figures missing. Standard library only: it runs where the check ran.

    python3 scripts/gpu_check_summary.py STEPS_TSV OUT_DIR
    python3 scripts/gpu_check_summary.py --check STEP OUT_DIR   (one step's figures; exit 1 when missing)
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check_figures as figures  # noqa: E402  (beside this script, standard library only)

TIMED_OUT = (124, 137)


def load(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def steps(path):
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            name, limit, took, rc = line.rstrip("\n").split("\t")
            rows.append((name, int(limit), int(took), int(rc)))
    return rows


def tests_line(out):
    try:
        suite = ET.parse(os.path.join(out, "gpu-tests.xml")).getroot()
    except (OSError, ET.ParseError):
        return "fast GPU tests: no report"
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    get = lambda key: int(suite.get(key) or 0)   # noqa: E731
    passed = get("tests") - get("failures") - get("errors") - get("skipped")
    return "fast GPU tests: %d passed, %d failed, %d errors, %d skipped" % (
        passed, get("failures"), get("errors"), get("skipped"))


def probe(host, name):
    block = ((host or {}).get("probes") or {}).get(name) or {}
    return block.get("data") if block.get("status") == "ok" else None, block


def copy_bench_lines(out):
    data, block = probe(load(os.path.join(out, "copy-bench.json")), "copy_bench")
    if data is None:
        return ["copy_bench: %s" % (block.get("reason") or block.get("status") or "no result")]
    lines = []
    for dev in data.get("gpus") or []:
        ok = [w for w in dev.get("workloads") or [] if w.get("status") == "ok"]
        best = sorted(set(str(w.get("best")) for w in ok))
        lines.append("copy_bench GPU %s %s: %s, %d workloads measured, best %s; lost to budget: %s" % (
            dev.get("index"), dev.get("name", ""), dev.get("status"), len(ok), ",".join(best) or "-",
            ",".join(dev.get("lost_field_sets") or []) or "none"))
        for w in ok[:3]:
            inst = (w.get("strategies") or {}).get("installed") or {}
            gates = "".join(" %s on %s / off %s us" % (gate, (both.get("on") or {}).get("median_us"),
                                                       (both.get("off") or {}).get("median_us"))
                            for gate, both in sorted((inst.get("env") or {}).items()))
            lines.append("  %s: installed %s %s us%s; saving %s us" % (
                w.get("name"), inst.get("status"), inst.get("median_us"), gates, w.get("saving_vs_installed_us")))
    release = (data.get("installed") or {}).get("release")
    head = "copy_bench on %s, sglang %s (installed modules from %s)" % (
        data.get("device"), ".".join(map(str, release)) if isinstance(release, list) else release,
        (data.get("installed") or {}).get("modules_from"))
    return [head] + (lines or ["copy_bench: no device measured"])


def repro_lines(out):
    data, block = probe(load(os.path.join(out, "synthetic-repro.json")), "cuda_graph")
    if data is None:
        return ["synthetic repro: %s" % (block.get("reason") or block.get("status") or "no result")]
    counts = {}
    for cell in data.get("cells") or []:
        counts[cell.get("status")] = counts.get(cell.get("status"), 0) + 1
    lines = ["synthetic repro: cells %s%s" % (", ".join("%s %d" % kv for kv in sorted(counts.items())),
                                              "; " + data["skip_reason"] if data.get("skip_reason") else "")]
    lines += ["  boundary: %s" % b.get("text") for b in data.get("boundaries") or [] if b.get("text")]
    return lines


def skip_reasons(out, step):
    """pytest's `SKIPPED [n] file:line: reason` lines of one step in gpu-check.log."""
    found, inside = [], False
    try:
        with open(os.path.join(out, "gpu-check.log"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("=== "):
                    inside = line.startswith("=== %s " % step)
                elif inside and line.startswith("SKIPPED"):
                    found.append(line.split(": ", 1)[-1].strip())
    except OSError:
        pass
    return sorted(set(found))


def sglang_lines(out):
    cells = load(os.path.join(out, "sglang-cells.json"))
    if not cells:
        reasons = skip_reasons(out, "sglang-launches")
        return ["sglang launches: none ran: %s" % ("; ".join(reasons) or "see gpu-check.log")]
    return ["sglang %s: %s" % (algorithm, "; ".join("bs %s %s%s" % (c.get("batch_size"), c.get("status"),
                                                                     " (%s)" % c["detail"][:80] if c.get("detail")
                                                                     else "") for c in rows))
            for algorithm, rows in sorted(cells.items())]


def step_problems(step, out, expect_sglang=False):
    """What is missing from one step's figures, one line each (scripts/gpu_check_figures.py)."""
    if step == "user-path":
        host = load(os.path.join(out, "user-path.json"))
        return (figures.copy_bench_problems(host) + figures.cuda_graph_problems(host)
                + figures.answer_problems(load(os.path.join(out, "user-path-report.json"))))
    if step == "copy-bench":
        return figures.copy_bench_problems(load(os.path.join(out, "copy-bench.json")))
    if step == "synthetic-repro":
        return figures.cuda_graph_problems(load(os.path.join(out, "synthetic-repro.json")))
    if step == "sglang-launches":
        return figures.sglang_launch_problems(load(os.path.join(out, "sglang-cells.json")), expect_sglang)
    return []


FIGURE_STEPS = ("user-path", "copy-bench", "synthetic-repro", "sglang-launches")


def user_path_lines(out):
    """The user's path: what each GPU probe was given and measured, and Q5 / Q6 as the report states them."""
    host = load(os.path.join(out, "user-path.json"))
    if host is None:
        return ["user path: no result"]
    lines = []
    for name in ("copy_bench", "cuda_graph"):
        block = (host.get("probes") or {}).get(name) or {}
        data = block.get("data") if block.get("status") == "ok" else None
        if name == "copy_bench":
            measured = ", ".join("GPU %s %d" % (g.get("index"), len(figures.timed_workloads(g)))
                                 for g in (data or {}).get("gpus") or [])
            what = "timed workloads: %s" % (measured or "none")
        else:
            cells = (data or {}).get("cells") or []
            left = (data or {}).get("unmeasured") or {}
            what = "cells measured %d of %d%s" % (
                len([c for c in cells if c.get("status") not in ("skipped", None)]), len(cells),
                "; %s" % left.get("detail") if left.get("detail") else "")
        lines.append("user path %s: %s in %.1f s, given %s s of %s s; %s" % (
            name, block.get("status"), block.get("duration_s") or 0, block.get("limit_s"), block.get("declared_s"),
            what))
    report = load(os.path.join(out, "user-path-report.json")) or {}
    for q in (report.get("answers") or {}).get("questions") or []:
        if q.get("id") in ("Q5", "Q6"):
            for a in q.get("answers") or []:
                lines.append("  %s %s: %s" % (q["id"], a.get("status"), str(a.get("answer") or "")[:150]))
    return lines


def check_main(step, out):
    """`--check STEP OUT`: print what the step's figures lack; exit 1 then, unless this is a rehearsal."""
    problems = step_problems(step, out, os.environ.get("EXPECT_SGLANG") == "1")
    for line in problems:
        print("FIGURES MISSING: %s" % line[:200])
    if not problems:
        print("figures: ok")
    return 1 if problems and os.environ.get("REHEARSE") != "1" else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--check":
        return check_main(argv[2], argv[3])
    tsv, out = argv[1], argv[2]
    rows = steps(tsv)
    print("\n=== gpu-check summary (figures in %s)" % out)
    failed = False
    for name, limit, took, rc in rows:
        state = "ok" if rc == 0 else ("TIMED OUT" if rc in TIMED_OUT else "FAILED (exit %d)" % rc)
        failed = failed or rc != 0
        print("%-16s %4d s of %4d s  %s" % (name, took, limit, state))
    print("total %d s of %d s planned" % (sum(r[2] for r in rows), sum(r[1] for r in rows)))
    for line in [tests_line(out)] + user_path_lines(out) + copy_bench_lines(out) + repro_lines(out) + sglang_lines(out):
        print(line[:200])
    ran = [r[0] for r in rows]
    for step in FIGURE_STEPS:
        if step in ran:
            problems = step_problems(step, out, os.environ.get("EXPECT_SGLANG") == "1")
            print("figures %-16s %s" % (step, "ok" if not problems else "MISSING: " + "; ".join(problems)[:170]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
