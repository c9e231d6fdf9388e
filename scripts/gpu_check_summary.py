"""The one-screen summary of scripts/gpu-check.sh: each step's time and outcome, then the figures it left in
$OUT (the fast tests' counts, copy_bench per GPU, the synthetic repro's boundaries, the sglang cells).
Exit 1 when a step failed or ran past its limit. Standard library only: it runs where the check ran.

    python3 scripts/gpu_check_summary.py STEPS_TSV OUT_DIR
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

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


def main(argv):
    tsv, out = argv[1], argv[2]
    rows = steps(tsv)
    print("\n=== gpu-check summary (figures in %s)" % out)
    failed = False
    for name, limit, took, rc in rows:
        state = "ok" if rc == 0 else ("TIMED OUT" if rc in TIMED_OUT else "FAILED (exit %d)" % rc)
        failed = failed or rc != 0
        print("%-16s %4d s of %4d s  %s" % (name, took, limit, state))
    print("total %d s of %d s planned" % (sum(r[2] for r in rows), sum(r[1] for r in rows)))
    for line in [tests_line(out)] + copy_bench_lines(out) + repro_lines(out) + sglang_lines(out):
        print(line[:200])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
