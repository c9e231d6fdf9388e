"""The figures each scripts/gpu-check.sh step must leave, checked: a step whose command exited 0 but measured
nothing fails here. Each check takes what the step stored (a host document, `gpudiag report --json`'s answers,
the sglang cells) and returns its problems, one line each; no problem means the figures are there.
Standard library only: it runs where the check ran.
"""

# A cell has an outcome when its status is one of these (probes/graphrepro/declared.py NOTES).
CELL_OUTCOMES = ("ok", "capture_failed", "replay_failed", "mismatch", "device_fault", "timeout", "skipped",
                 "crashed_on_request", "hang", "silent_failure", "error")
NOT_CHECKED = "not checked"


def _probe(host, name):
    """(data of an ok probe or None, the probe's block) from a stored host document."""
    block = ((host or {}).get("probes") or {}).get(name) or {}
    return (block.get("data") if block.get("status") == "ok" else None), block


def _why_not(name, block):
    error = block.get("error") or {}
    return "%s: %s%s" % (name, block.get("status") or "no result",
                         ": " + str(error.get("message") or block.get("reason") or "")[:160]
                         if error or block.get("reason") else "")


def _timed(strategy):
    """Whether a strategy's entry holds a timing: an ok median, eager or inside a replayed graph."""
    if not isinstance(strategy, dict) or strategy.get("status") not in (None, "ok"):
        return False
    graph = strategy.get("graph") if isinstance(strategy.get("graph"), dict) else {}
    return any(isinstance(v, (int, float)) and not isinstance(v, bool)
               for v in (strategy.get("median_us"), graph.get("median_us")))


def timed_workloads(gpu):
    """The workloads of one copy_bench GPU record that hold at least one timed strategy."""
    return [w for w in gpu.get("workloads") or [] if isinstance(w, dict) and w.get("status") == "ok"
            and any(_timed(s) for s in (w.get("strategies") or {}).values())]


def copy_bench_problems(host):
    """copy_bench must have timed at least one workload on every GPU it lists."""
    data, block = _probe(host, "copy_bench")
    if data is None:
        return [_why_not("copy_bench", block)]
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        return ["copy_bench: no GPU listed"]
    return ["copy_bench GPU %s: no timed workload (%s)" % (g.get("index"), g.get("status"))
            for g in gpus if not timed_workloads(g)]


def cuda_graph_problems(host):
    """cuda_graph must give every cell an outcome and measure at least one."""
    data, block = _probe(host, "cuda_graph")
    if data is None:
        return [_why_not("cuda_graph", block)]
    cells = [c for c in data.get("cells") or [] if isinstance(c, dict)]
    if not cells:
        return ["cuda_graph: no cell"]
    problems = ["cuda_graph cell %s bs=%s draft=%s: no outcome (%r)" % (
        c.get("path"), c.get("batch_size"), c.get("draft_tokens"), c.get("status"))
        for c in cells if c.get("status") not in CELL_OUTCOMES]
    if all(c.get("status") == "skipped" for c in cells):
        problems.append("cuda_graph: no cell measured: %s" % (data.get("skip_reason") or cells[0].get("detail")))
    return problems


def answer_problems(report, ids=("Q5", "Q6")):
    """Each named question of `gpudiag report --json` must be answered for some host, never 'not checked'."""
    questions = {q.get("id"): q for q in ((report or {}).get("answers") or {}).get("questions") or []
                 if isinstance(q, dict)}
    problems = []
    for qid in ids:
        answers = [a for a in (questions.get(qid) or {}).get("answers") or [] if isinstance(a, dict)]
        if not answers:
            problems.append("%s: no answer" % qid)
        for answer in answers:
            if answer.get("status") == NOT_CHECKED:
                problems.append("%s: not checked: %s" % (qid, str(answer.get("answer") or "")[:160]))
    return problems


def sglang_launch_problems(cells, expected):
    """With an sglang runtime expected, at least one launch must have run and every cell have an outcome."""
    launched = [c for rows in (cells or {}).values() for c in rows or [] if isinstance(c, dict)]
    if not expected:
        return []
    if not launched:
        return ["sglang launches: none ran, though an sglang runtime was expected"]
    return ["sglang cell bs=%s: no outcome (%r)" % (c.get("batch_size"), c.get("status"))
            for c in launched if c.get("status") not in CELL_OUTCOMES or c.get("status") in ("skipped", "error")]
