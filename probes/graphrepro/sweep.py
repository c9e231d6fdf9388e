"""Sweep batch sizes and bisect the draft-token budget to find where CUDA graphs stop working.

Pure logic: an `oracle(batch_size, draft_tokens) -> cell dict` does the work (a child running the
synthetic harness, or a launched sglang server). Failure is assumed monotonic in draft tokens for a
batch size, so each batch size costs about log2(candidates) + 2 cells instead of all of them.
"""

GOOD = ("ok",)
# "error": the harness could not set the cell up (a launch that died before ready outside graph code, a bad
# config): the repro's own error, never a boundary.
UNKNOWN = ("skipped", "error")
VERBS = {"capture_failed": "fails graph capture", "replay_failed": "fails on replay", "mismatch":
         "replays wrong results", "device_fault": "crashes (device fault)", "crashed_on_request": "crashes",
         "hang": "hangs", "timeout": "hangs", "silent_failure": "accepts no draft tokens"}


def draft_token_values(low, high):
    low, high = int(low), int(high)
    if low > high:
        low, high = high, low
    return list(range(max(1, low), high + 1))


def is_failure(cell):
    return cell.get("status") not in GOOD + UNKNOWN


def bisect_draft_tokens(values, test):
    """Largest passing and smallest failing value among sorted `values`; `test(value)` -> cell.

    Returns {"max_ok", "min_fail", "fail_status", "complete"}; a skipped cell stops the search.
    """
    row = {"max_ok": None, "min_fail": None, "fail_status": None, "complete": False}
    if not values:
        return row

    def probe(index):
        cell = test(values[index])
        if cell.get("status") in UNKNOWN:
            return None
        if is_failure(cell):
            row["min_fail"], row["fail_status"] = values[index], cell.get("status")
            return False
        row["max_ok"] = values[index] if row["max_ok"] is None else max(row["max_ok"], values[index])
        return True

    top = probe(len(values) - 1)
    if top is None or top:
        row["complete"] = top is not None
        return row
    if len(values) == 1:
        row["complete"] = True
        return row
    bottom = probe(0)
    if bottom is None or not bottom:
        row["complete"] = bottom is not None
        return row
    ok_i, fail_i = 0, len(values) - 1
    while fail_i - ok_i > 1:
        mid = (ok_i + fail_i) // 2
        outcome = probe(mid)
        if outcome is None:
            return row
        if outcome:
            ok_i = mid
        else:
            fail_i = mid
    row["min_fail"] = values[fail_i]
    row["complete"] = True
    return row


def sweep(batch_sizes, values, oracle):
    """Every batch size, bisected over draft tokens. Returns {"cells": [...], "rows": [...]}."""
    cells, cache = [], {}

    def test_at(batch_size):
        def test(draft_tokens):
            key = (batch_size, draft_tokens)
            if key not in cache:
                cell = dict(oracle(batch_size, draft_tokens))
                cell.setdefault("batch_size", batch_size)
                cell.setdefault("draft_tokens", draft_tokens)
                cache[key] = cell
                cells.append(cell)
            return cache[key]
        return test

    rows = []
    for batch_size in sorted(set(int(b) for b in batch_sizes)):
        row = bisect_draft_tokens(list(values), test_at(batch_size))
        row["batch_size"] = batch_size
        rows.append(row)
    return {"cells": cells, "rows": rows}


def sweep_launches(batch_sizes, values, launch):
    """Bisect draft tokens where one `launch(draft_tokens) -> [cell per batch size]` covers every batch
    size (one sglang server captures them all); rows per batch size come from the cells seen."""
    cells, by_value = [], {}

    def test(draft_tokens):
        if draft_tokens not in by_value:
            launched = [dict(c, draft_tokens=draft_tokens) for c in launch(draft_tokens)]
            by_value[draft_tokens] = launched
            cells.extend(launched)
        launched = by_value[draft_tokens]
        failing = [c for c in launched if is_failure(c)]
        if failing:
            return failing[0]
        return {"status": "skipped"} if all(c.get("status") in UNKNOWN for c in launched) else {"status": "ok"}

    bisect_draft_tokens(list(values), test)
    return {"cells": cells, "rows": rows_from_cells(batch_sizes, cells)}


def rows_from_cells(batch_sizes, cells):
    """Per batch size: largest ok and smallest failing draft tokens. A row is incomplete when a cell
    above its last ok value was never reached (the server died at a smaller batch size)."""
    rows = []
    for size in sorted(set(int(b) for b in batch_sizes)):
        mine = [c for c in cells if c.get("batch_size") == size]
        oks = [c["draft_tokens"] for c in mine if c.get("status") in GOOD]
        fails = sorted((c["draft_tokens"], c.get("status")) for c in mine if is_failure(c))
        unreached = [c["draft_tokens"] for c in mine if c.get("status") in UNKNOWN]
        max_ok = max(oks) if oks else None
        rows.append({"batch_size": size, "max_ok": max_ok, "min_fail": fails[0][0] if fails else None,
                     "fail_status": fails[0][1] if fails else None,
                     "complete": bool(mine) and not any(max_ok is None or v > max_ok for v in unreached)})
    return rows


def describe_boundary(label, rows, where=""):
    """One sentence a human reads, e.g. 'DFLASH crashes when draft tokens > 8 at bs >= 4 on sm_103; ...'."""
    on = " on %s" % where if where else ""
    tested = [r for r in rows if r.get("max_ok") is not None or r.get("min_fail") is not None]
    if not tested:
        return {"text": "%s: nothing ran%s" % (label, on), "failing_from_batch_size": None, "safe_up_to": None}
    failing = [r for r in tested if r.get("min_fail") is not None]
    if not failing:
        top = min(r["max_ok"] for r in tested)
        sizes = ", ".join(str(r["batch_size"]) for r in tested)
        return {"text": "%s: graphs safe up to %d draft tokens at every batch size tested (%s)%s"
                        % (label, top, sizes, on), "failing_from_batch_size": None, "safe_up_to": top}
    first = min(failing, key=lambda r: r["batch_size"])
    from_bs = first["batch_size"]
    above = [r for r in tested if r["batch_size"] >= from_bs]
    scope = "bs >= %d" % from_bs
    if any(r.get("min_fail") is None and r.get("complete", True) for r in above):
        # a larger batch size passed where a smaller one failed: not monotonic, so name the sizes
        scope = "bs " + ", ".join(str(r["batch_size"]) for r in failing)
    verb = VERBS.get(first.get("fail_status"), "fails")
    oks = [r["max_ok"] for r in failing]
    if any(v is None for v in oks):
        text = "%s %s at every draft-token count tested at %s%s" % (label, verb, scope, on)
        safe = None
    else:
        safe = min(oks)
        text = "%s %s when draft tokens > %d at %s%s; graphs are safe up to %d" % (label, verb, safe, scope,
                                                                                   on, safe)
    return {"text": text, "failing_from_batch_size": from_bs, "safe_up_to": safe,
            "fail_status": first.get("fail_status")}
