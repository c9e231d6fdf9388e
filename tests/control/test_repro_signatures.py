"""The signature table as data: well formed, most specific first, and the older recorded logs
(tests/fixtures/logs/*.log) still named by their signature and line."""
import re
from pathlib import Path

import pytest

from gpudiag.repro import signatures as sig
from probes.crashlog import releases
from probes.crashlog.classify import render_advice
from probes.crashlog.families import FAMILIES
from probes.crashlog.table import SIGNATURES

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

# fixture -> (primary signature, first line of the crash)
EXPECTED = {
    "dflash_capture_end_assert.log": ("capture_end_no_active_capture", 9),
    "eagle_capture_failed_oom.log": ("oom_during_capture", 6),
    "eagle_capture_failed.log": ("capture_failed", 4),
    "dflash_illegal_memory_access.log": ("illegal_memory_access_replay", 6),
    "eagle3_replay_none_copy.log": ("replay_input_copy_none", 2),
    # Graphs replayed before it ("cuda graph: True"), but no capture was open: not blamed on a graph.
    "tp2_nccl_graph_hang.log": ("nccl_collective_timeout", 4),
    "b300_eagle_draft_capture.log": ("sm103_eagle_draft_capture", 4),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_recorded_log_names_its_signature_and_line(name):
    result = sig.classify_log((LOGS / name).read_text())
    signature, line = EXPECTED[name]
    assert result["outcome"] == "known_signature"
    assert result["crashes"][0]["signature"]["name"] == signature
    assert result["crashes"][0]["line"] == line


def test_clean_and_info_only_logs_are_not_crashes():
    assert sig.classify_log((LOGS / "clean_eagle_server.log").read_text())["outcome"] == "clean"
    info = sig.classify_log((LOGS / "dflash_draft_graph_disabled.log").read_text())
    assert info["outcome"] == "clean"
    assert [n["name"] for n in info["notes"]] == ["dflash_draft_graph_disabled"]
    assert info["dflash_draft_graph"]["state"] == "disabled"
    assert info["dflash_draft_graph"]["reason"].startswith("the draft attention backend does not support")


def test_acceptance_stuck_at_one_is_a_note_not_a_crash():
    text = "[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 8, #token: 900, token usage: 0.00, accept len: 1.00"
    result = sig.classify_log(text)
    assert result["outcome"] == "clean" and [n["name"] for n in result["notes"]] == ["acceptance_stuck_at_one"]


def test_every_required_reference_is_in_the_table():
    references = " ".join(e["reference"] for e in SIGNATURES)
    for ref in ("#35437", "#26957", "#22930", "z-lab/dflash #146", "#3395", "PR #31852", "#25563"):
        assert ref in references


@pytest.mark.parametrize("generation", ["0.5.14+", "before 0.5.14", None])
def test_every_advice_is_filled_in_every_release_spelling(generation):
    words = releases.flag_words(generation)
    for entry in SIGNATURES:
        advice = render_advice(entry["recommendation"], words)
        assert "{" not in advice and "}" not in advice, (entry["name"], generation)


def test_the_table_is_well_formed():
    """What a control-side check once validated on every run, checked once here: the table is code."""
    names = [entry["name"] for entry in SIGNATURES]
    assert len(names) == len(set(names))
    for entry in SIGNATURES:
        assert entry.get("severity", "error") in ("critical", "error", "warning", "info"), entry["name"]
        assert entry["match"] and entry["meaning"] and entry["recommendation"] and entry["reference"]
        for key in ("match", "requires", "context"):
            assert isinstance(entry.get(key) or [], list), (entry["name"], key)
            for pattern in entry.get(key) or []:
                re.compile(pattern)
        for family in entry.get("families") or [entry.get("family")]:
            assert family is None or family in FAMILIES, (entry["name"], family)
