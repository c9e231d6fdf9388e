"""The one constructor of a cuda_graph cell record: every path that emits a cell (measured, skipped, timed out,
refused, out of time, no answer from the child) builds it here, so every cell carries the declared keys
(probes/graphrepro/declared.py SHAPE) whatever happened to it.
"""

BUDGET_SPENT = "time budget spent"


def cell(path, algorithm, batch_size, draft_tokens, status, detail=None, mode="synthetic", **extra):
    """A cell with every declared key; `extra` adds the fields a path knows (capture_s, command, log_excerpt...).
    A missing status is the child's silence: recorded as `error`, never left out."""
    record = {"path": str(path), "algorithm": str(algorithm), "batch_size": int(batch_size),
              "draft_tokens": int(draft_tokens), "status": str(status or "error"),
              "detail": None if detail is None else str(detail), "signature": None, "mode": mode}
    if not status:
        record["detail"] = detail or "no result came back for this cell"
    for key, value in extra.items():
        if key not in record or value is not None:
            record[key] = value
    return record


def budget_cell(path, algorithm, batch_size, draft_tokens, need_s, mode="synthetic", when="before this cell"):
    """A cell the time left could not hold: skipped, with the seconds it would need."""
    return cell(path, algorithm, batch_size, draft_tokens, "skipped", "%s %s" % (BUDGET_SPENT, when), mode,
                need_s=round(float(need_s), 1))


def unmeasured(cells):
    """What the time left did not hold: how many cells and the seconds they would need, or None."""
    left = [c for c in cells if c.get("status") == "skipped" and isinstance(c.get("need_s"), (int, float))]
    if not left:
        return None
    need = round(sum(c["need_s"] for c in left), 1)
    return {"cells": len(left), "need_s": need,
            "detail": "%d cell(s) not measured for lack of time; about %.0f s more would measure them"
                      % (len(left), need)}
