"""Repro option parsing, the outcome precedence behind the exit code, and the stored summary."""
import pytest

from gpudiag.models import HostResult, ProbeResult
from gpudiag.repro import plan, summary


def test_option_parsing():
    assert plan.parse_algorithms("all") == ("EAGLE", "EAGLE3", "DFLASH")
    assert plan.parse_algorithms("dflash,EAGLE,dflash") == ("DFLASH", "EAGLE")
    assert plan.parse_batch_sizes("64, 1,4,4") == (1, 4, 64)
    assert plan.parse_draft_tokens("2-16") == (2, 16) and plan.parse_draft_tokens("8") == (8, 8)
    assert plan.parse_model_override('{"rope_theta": 10000}') == {"rope_theta": 10000}
    assert plan.parse_model_override(None) is None
    for parse, text, message in [(plan.parse_algorithms, "MEDUSA", "unknown MEDUSA"),
                                 (plan.parse_batch_sizes, "1,x", "comma-separated integers"),
                                 (plan.parse_batch_sizes, "0,4", "positive"),
                                 (plan.parse_draft_tokens, "16-2", "LOW <= HIGH"),
                                 (plan.parse_draft_tokens, "a-b", "N or LOW-HIGH"),
                                 (plan.parse_model_override, "{x", "not valid JSON"),
                                 (plan.parse_model_override, "[1]", "expected a JSON object")]:
        with pytest.raises(plan.PlanError, match=message):
            parse(text)


def test_plan_becomes_probe_options_without_a_signature_table():
    p = plan.ReproPlan(algorithms=("EAGLE3", "DFLASH"), batch_sizes=(1, 4), draft_tokens=(2, 16))
    options = p.probe_options()
    assert options["draft_tokens"] == [2, 16] and options["algorithms"] == ["EAGLE3", "DFLASH"]
    assert "signatures" not in options   # the probe classifies with its own classifier
    assert options["max_mem_mib"] == 4096 and plan.ReproPlan(max_mem_mib=512).to_dict()["max_mem_mib"] == 512
    assert p.to_dict() == options


def host(name, cells=None, status="ok", probe_status="ok"):
    probes = {}
    if cells is not None:
        probes["cuda_graph"] = ProbeResult(status=probe_status, data={"cells": cells, "mode": "synthetic",
                                                                       "environment": {"torch": "2.9"}},
                                           reason=None if probe_status == "ok" else "why")
    return HostResult(name=name, status=status, reason="" if status == "ok" else "down", probes=probes)


SKIPPED = [{"path": "eagle_draft", "batch_size": 1, "draft_tokens": 4, "status": "skipped", "detail": "no CUDA"}]
OK = [{"path": "eagle_draft", "batch_size": 1, "draft_tokens": 4, "status": "ok", "max_abs_diff": 0.0}]
BAD = OK + [{"path": "dflash_verify", "batch_size": 4, "draft_tokens": 9, "status": "device_fault",
             "detail": "child killed by SIGSEGV", "signature": {"name": "native_crash"}}]


@pytest.mark.parametrize("hosts, expected", [
    ([host("a", SKIPPED)], "nothing_ran"),
    ([host("a", OK), host("b", SKIPPED)], "ok"),
    ([host("a", BAD)], "failures"),
    ([host("a", BAD), host("b", status="unreachable")], "hosts_failed"),
    ([host("a", OK, probe_status="timeout")], "hosts_failed"),
    ([host("a", OK + [dict(OK[0], status="error", detail="bad config")])], "cells_failed_to_run"),
    ([host("a", BAD + [dict(OK[0], status="error")])], "failures"),
])
def test_outcome_precedence(hosts, expected):
    assert summary.outcome([summary.host_repro(h) for h in hosts]) == expected


def test_summary_and_matrix_rows():
    repros = [summary.host_repro(host("gpu1", BAD)), summary.host_repro(host("gpu2", status="unreachable"))]
    block = summary.run_summary(repros, {"layers": 2})
    assert block["outcome"] == "hosts_failed"
    assert block["hosts"][0]["cell_counts"] == {"ok": 1, "device_fault": 1}
    assert block["hosts"][1] == {"host": "gpu2", "ran": False, "reason": "down", "environment": "",
                                 "cell_counts": {}, "boundaries": [], "signatures": [], "advice": []}
    rows = summary.cell_rows(repros[0])
    assert rows[0] == ("DFLASH", "dflash_verify", "4", "9", "device_fault", "[native_crash] child killed by SIGSEGV")
    assert rows[1][5] == "max|diff| 0"


def test_identical_skipped_rows_collapse_into_one_with_count_and_reason():
    reason = "no CUDA device visible to torch 2.13.0+cpu"
    cells = [{"path": p, "algorithm": a, "batch_size": b, "draft_tokens": 8, "status": "skipped", "detail": reason}
             for a, p in (("EAGLE", "eagle_draft"), ("DFLASH", "dflash_verify")) for b in (1, 4, 16)]
    cells.append({"path": "dflash_verify", "algorithm": "DFLASH", "batch_size": 64, "draft_tokens": 8,
                  "status": "skipped", "detail": "over the memory cap of 4096 MiB"})
    rows = summary.cell_rows(summary.HostRepro("gpu1", True, "", {"cells": cells}))
    assert rows == [("DFLASH", "dflash_verify", "1,4,16", "8", "skipped ×3", reason),
                    ("DFLASH", "dflash_verify", "64", "8", "skipped", "over the memory cap of 4096 MiB"),
                    ("EAGLE", "eagle_draft", "1,4,16", "8", "skipped ×3", reason)]
