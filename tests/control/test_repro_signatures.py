"""The signature table as data, and classification of recorded crash logs with quoted line numbers."""
import json
from pathlib import Path

import pytest

from gpudiag.repro import signatures as sig

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

# fixture -> (primary signature, 1-based line of its first quoted line)
EXPECTED = {
    "dflash_capture_end_assert.log": ("capture_end_no_active_capture", 18),
    "eagle_capture_failed_oom.log": ("oom_during_capture", 12),
    "eagle_capture_failed.log": ("capture_failed", 15),
    "dflash_illegal_memory_access.log": ("illegal_memory_access_replay", 13),
    "eagle3_replay_none_copy.log": ("replay_input_copy_none", 9),
    "tp2_nccl_graph_hang.log": ("nccl_in_graph_hang", 4),
    "b300_eagle_draft_capture.log": ("sm103_eagle_draft_capture", 7),
}


@pytest.fixture(scope="module")
def table():
    return sig.load_signatures()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_names_its_signature_and_line(table, name):
    text = (LOGS / name).read_text()
    matches = sig.classify_text(text, table)
    signature, line = EXPECTED[name]
    assert matches[0].signature.name == signature
    assert matches[0].lines[0].number == line
    assert matches[0].lines[0].text == text.splitlines()[line - 1].strip()[:300]
    assert sig.crash_found(matches)


def test_clean_and_info_only_logs_are_not_crashes(table):
    assert sig.classify_text((LOGS / "clean_eagle_server.log").read_text(), table) == []
    info = sig.classify_text((LOGS / "dflash_draft_graph_disabled.log").read_text(), table)
    assert [m.signature.name for m in info] == ["dflash_draft_graph_disabled"]
    assert not sig.crash_found(info)


def test_oom_capture_also_shows_the_generic_capture_advice(table):
    names = [m.signature.name for m in sig.classify_text((LOGS / "eagle_capture_failed_oom.log").read_text(), table)]
    assert names[:2] == ["oom_during_capture", "capture_failed"]


def test_acceptance_stuck_at_one_is_a_warning(table):
    text = "[TP0] Decode batch. #running-req: 8, #token: 900, token usage: 0.00, accept len: 1.00, cuda graph: True"
    matches = sig.classify_text(text, table)
    assert [m.signature.name for m in matches] == ["acceptance_stuck_at_one"]
    assert not sig.crash_found(matches)


def test_every_required_reference_is_in_the_table():
    references = " ".join(e["reference"] for e in sig.load_table())
    for ref in ("#35437", "#26957", "#22930", "z-lab/dflash #146", "#3395", "PR #31852", "#25563"):
        assert ref in references


def test_bad_tables_name_the_file_and_entry(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"signatures": [{"name": "x", "match": ["("], "meaning": "m",
                                               "recommendation": "r", "reference": "f"}]}))
    with pytest.raises(sig.SignatureError, match=r"s.json: signatures\[0\]: bad pattern"):
        sig.load_signatures(bad)
    bad.write_text(json.dumps({"signatures": [{"name": "x"}]}))
    with pytest.raises(sig.SignatureError, match="missing 'match'"):
        sig.load_table(bad)
    bad.write_text("{")
    with pytest.raises(sig.SignatureError, match="s.json:1: not valid JSON"):
        sig.load_table(bad)
