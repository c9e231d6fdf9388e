"""Sweep and bisection of the draft-token budget, with a fake oracle standing in for the GPU."""
from probes.graphrepro import sweep


def oracle_failing_above(limits, status="crashed_on_request"):
    """Fails when draft tokens exceed limits[bs] (None: never fails); records every call."""
    calls = []

    def oracle(batch_size, draft_tokens):
        calls.append((batch_size, draft_tokens))
        limit = limits.get(batch_size)
        ok = limit is None or draft_tokens <= limit
        return {"status": "ok" if ok else status}
    return oracle, calls


def test_bisection_finds_the_exact_boundary_in_few_cells():
    values = sweep.draft_token_values(2, 16)
    for limit in range(2, 16):
        oracle, calls = oracle_failing_above({4: limit})
        row = sweep.bisect_draft_tokens(values, lambda dt: oracle(4, dt))
        assert (row["max_ok"], row["min_fail"], row["complete"]) == (limit, limit + 1, True)
        assert len(calls) <= 6, (limit, calls)   # 15 candidates: top, bottom, then log2


def test_all_ok_costs_one_cell_and_all_failing_two():
    oracle, calls = oracle_failing_above({})
    row = sweep.bisect_draft_tokens([2, 3, 4, 5, 6, 7, 8], lambda dt: oracle(1, dt))
    assert row["max_ok"] == 8 and row["min_fail"] is None and len(calls) == 1
    oracle, calls = oracle_failing_above({1: 0}, status="capture_failed")
    row = sweep.bisect_draft_tokens([2, 3, 4, 5, 6, 7, 8], lambda dt: oracle(1, dt))
    assert row["max_ok"] is None and row["min_fail"] == 2 and row["fail_status"] == "capture_failed"
    assert len(calls) == 2


def test_a_skipped_cell_stops_the_search_as_incomplete():
    row = sweep.bisect_draft_tokens([2, 4, 8], lambda dt: {"status": "skipped"})
    assert row == {"max_ok": None, "min_fail": None, "fail_status": None, "complete": False}


def test_sweep_covers_every_batch_size_and_the_sentence_names_the_boundary():
    oracle, calls = oracle_failing_above({4: 8, 16: 8, 64: 8})
    result = sweep.sweep([64, 1, 4, 16], sweep.draft_token_values(2, 16), oracle)
    rows = {r["batch_size"]: r for r in result["rows"]}
    assert rows[1]["max_ok"] == 16 and rows[1]["min_fail"] is None
    assert all(rows[b]["max_ok"] == 8 and rows[b]["min_fail"] == 9 for b in (4, 16, 64))
    assert len(result["cells"]) == len(set(calls)) == len(calls)   # no cell runs twice
    boundary = sweep.describe_boundary("DFLASH", result["rows"], "sm_103")
    assert boundary["text"] == ("DFLASH crashes when draft tokens > 8 at bs >= 4 on sm_103; "
                                "graphs are safe up to 8")
    assert boundary["failing_from_batch_size"] == 4 and boundary["safe_up_to"] == 8


def test_boundary_sentences_for_safe_and_non_monotonic_cases():
    oracle, _ = oracle_failing_above({})
    safe = sweep.describe_boundary("eagle_draft", sweep.sweep([1, 4], [2, 3, 4], oracle)["rows"], "sm_90")
    assert safe["text"] == "eagle_draft: graphs safe up to 4 draft tokens at every batch size tested (1, 4) on sm_90"
    oracle, _ = oracle_failing_above({4: 2}, status="hang")
    odd = sweep.describe_boundary("x", sweep.sweep([1, 4, 16], [2, 3, 4], oracle)["rows"])
    assert odd["text"] == "x hangs when draft tokens > 2 at bs 4; graphs are safe up to 2"
    assert sweep.describe_boundary("x", [])["text"] == "x: nothing ran"


def test_one_launch_per_draft_token_value_covers_every_batch_size():
    launches = []

    def launch(draft_tokens):
        """A server that crashes at bs 4 above 8 draft tokens, so bs 16 is never reached there."""
        launches.append(draft_tokens)
        if draft_tokens <= 8:
            return [{"batch_size": b, "status": "ok"} for b in (1, 4, 16)]
        return [{"batch_size": 1, "status": "ok"}, {"batch_size": 4, "status": "crashed_on_request"},
                {"batch_size": 16, "status": "skipped"}]

    result = sweep.sweep_launches([1, 4, 16], sweep.draft_token_values(2, 16), launch)
    assert launches == [16, 2, 9, 5, 7, 8]
    rows = {r["batch_size"]: r for r in result["rows"]}
    assert rows[1]["max_ok"] == 16 and rows[4]["min_fail"] == 9 and rows[4]["max_ok"] == 8
    assert rows[16]["max_ok"] == 8 and rows[16]["min_fail"] is None and not rows[16]["complete"]
    text = sweep.describe_boundary("EAGLE", result["rows"], "sm_100")["text"]
    assert text == "EAGLE crashes when draft tokens > 8 at bs >= 4 on sm_100; graphs are safe up to 8"
