"""The signature table as data: validated on load, most specific first, and the older recorded logs
(tests/fixtures/logs/*.log) still named by their signature and line."""
from pathlib import Path

import pytest

from gpudiag.repro import signatures as sig

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

# fixture -> (primary signature, first line of the crash)
EXPECTED = {
    "dflash_capture_end_assert.log": ("capture_end_no_active_capture", 9),
    "eagle_capture_failed_oom.log": ("oom_during_capture", 6),
    "eagle_capture_failed.log": ("capture_failed", 4),
    "dflash_illegal_memory_access.log": ("illegal_memory_access_replay", 6),
    "eagle3_replay_none_copy.log": ("replay_input_copy_none", 2),
    "tp2_nccl_graph_hang.log": ("nccl_in_graph_hang", 4),
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
    references = " ".join(e["reference"] for e in sig.load_table())
    for ref in ("#35437", "#26957", "#22930", "z-lab/dflash #146", "#3395", "PR #31852", "#25563"):
        assert ref in references


def test_the_table_sent_to_the_probe_has_no_unfilled_flag_words():
    for entry in sig.load_table():
        assert "{" not in entry["recommendation"], entry["name"]


def test_bad_tables_name_the_entry_and_the_field():
    good = {"name": "x", "match": ["a"], "meaning": "m", "recommendation": "r", "reference": "f"}
    with pytest.raises(sig.SignatureError, match=r"entry 0 \(x\): bad pattern '\('"):
        sig.load_table([dict(good, match=["("])])
    with pytest.raises(sig.SignatureError, match=r"entry 1 \(y\): missing match, meaning"):
        sig.load_table([good, {"name": "y", "recommendation": "r", "reference": "f"}])
    with pytest.raises(sig.SignatureError, match="severity 'fatal' is not one of"):
        sig.load_table([dict(good, severity="fatal")])
    with pytest.raises(sig.SignatureError, match="requires must be a list of strings"):
        sig.load_table([dict(good, requires="a")])
