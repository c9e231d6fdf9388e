"""The crash-log classifier over real logs quoted in sglang's public issues (tests/fixtures/logs/corpus).

Each fixture names its source URL, expected family and expected signature (and, for most, when the crash
came) in `#fixture` header lines, which are taken off before classifying. Advice is checked against the flags that real sglang wheels
define (probes/sglang_facts/flags.py over wheels from PyPI, never imported).
"""
import functools
import re
from pathlib import Path

import pytest

from probes.crashlog import releases
from probes.crashlog.classify import classify, render_advice
from probes.crashlog.table import SIGNATURES
from tests.sglang_wheels import require

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
FLAG = re.compile(r"--[a-z][a-z0-9-]+")


def load(path):
    raw = path.read_text(encoding="utf-8")
    header = {}
    for line in raw.splitlines():
        if line.startswith("#fixture "):
            key, _, value = line[len("#fixture "):].partition(":")
            header[key.strip()] = value.strip()
    text = "\n".join(line for line in raw.splitlines() if not line.startswith("#fixture "))
    return header, text


FIXTURES = sorted(CORPUS.glob("*.log"))


def test_the_corpus_covers_every_family_and_clean_startups():
    families = {load(p)[0]["family"] for p in FIXTURES}
    assert families >= {"capture_failure", "device_fault", "oom_in_capture", "nccl", "not_a_graph_problem",
                        "unclassified", "capture_hang", "clean"}
    assert len(FIXTURES) >= 20
    for path in FIXTURES:
        header = load(path)[0]
        assert re.match(r"https://github\.com/sgl-project/sglang/(issues|pull)/\d+$", header["source"]), path.name


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_each_log_lands_in_its_family_and_signature(path):
    header, text = load(path)
    result = classify(text)
    if header["family"] == "clean":
        assert result["outcome"] == "clean" and result["crashes"] == []
        return
    assert result["outcome"] != "clean", "a crash log reported clean"
    first = result["crashes"][0]
    assert first["family"] == header["family"]
    expected = None if header["signature"] == "-" else header["signature"]
    assert (first["signature"] or {}).get("name") == expected
    assert result["outcome"] == ("known_signature" if expected else "unclassified_crash")
    if "when" in header:          # where the crash sits: start-up, while serving, or not shown by the log
        assert first["when"] == header["when"]
    # The crash is placed by line number, and what is quoted is the log's own text.
    lines = text.splitlines()
    assert 1 <= first["line"] <= len(lines)
    for quoted in first["quoted"]:
        assert quoted["text"] == lines[quoted["line"] - 1].strip()[:300] or "<redacted>" in quoted["text"]
    if first["exception"]:
        assert first["exception"]["text"] in lines[first["exception"]["line"] - 1]


def test_not_a_graph_problem_names_its_kind_and_no_graph_advice():
    kinds = {}
    for path in FIXTURES:
        header, text = load(path)
        if header["family"] == "not_a_graph_problem":
            crash = classify(text)["crashes"][0]
            kinds[path.stem] = crash["detail"]
            assert crash["signature"] is None
    assert sorted(kinds.values()) == ["import_error", "model_config", "port_in_use"]


def test_the_dflash_assert_quotes_the_lines_that_show_dflash_with_prefill_graphs():
    header, text = load(CORPUS / "sglang_35437_dflash_breakable_capture_end.log")
    result = classify(text)
    crash = result["crashes"][0]
    quoted = [q["text"] for q in crash["quoted"]]
    assert any("--speculative-algorithm DFLASH" in q for q in quoted)
    assert any("breakable_cuda_graph" in q for q in quoted)
    assert result["release"]["generation"] == "0.5.14+"
    advice = crash["signature"]["recommendation"]
    assert "--disable-prefill-cuda-graph" in advice and "--enable-piecewise-cuda-graph" not in advice
    assert result["dflash_draft_graph"]["state"] == "capture_failed"


@functools.lru_cache(maxsize=None)
def wheel_flags(version):
    from probes.sglang_facts.flags import find_server_flags
    from probes.sglang_facts.sources import SourceTree
    tree = SourceTree(str(require(version)))
    return frozenset(f["name"] for f in find_server_flags(tree, r".")["server_flags"])


# The releases whose flags a piece of advice must use, for each release the advice may assume.
ASSUMED = [("0.5.14+", None, ("0.5.14", "0.5.23")), ("before 0.5.14", "0.5.11", ("0.5.11",)),
           ("before 0.5.14", "0.4.10", ("0.4.10",))]


@pytest.mark.parametrize("generation, release, wheels", ASSUMED)
def test_every_advice_names_flags_that_exist_in_the_release_it_assumes(generation, release, wheels):
    words = releases.flag_words(generation, release)
    checked = 0
    for entry in SIGNATURES:
        advice = render_advice(entry["recommendation"], words)
        assert "{" not in advice, entry["name"]
        for flag in FLAG.findall(advice):
            for version in wheels:
                assert flag in wheel_flags(version), f"{entry['name']}: {flag} is not a flag of sglang {version}"
            checked += 1
    assert checked >= 8


def test_advice_for_an_unknown_release_gives_both_spellings_each_of_a_real_release():
    words = releases.flag_words(None)
    assert "--cuda-graph-max-bs-decode (0.5.14+)" in words["max_bs"]
    assert "--cuda-graph-max-bs (before 0.5.14)" in words["max_bs"]
    assert "--cuda-graph-max-bs-decode" in wheel_flags("0.5.23") and "--cuda-graph-max-bs" in wheel_flags("0.5.11")
    assert "--disable-prefill-cuda-graph" in wheel_flags("0.5.14")
    assert "--enable-piecewise-cuda-graph" in wheel_flags("0.5.11")
    assert "--enable-piecewise-cuda-graph" not in wheel_flags("0.5.14")


def test_the_release_markers_hold_in_real_wheels():
    """Files the release inference relies on exist where it says they do."""
    new, old = require("0.5.14"), require("0.5.11")
    assert (new / "sglang/srt/speculative/dflash_worker_v2.py").is_file()
    assert (new / "sglang/srt/model_executor/runner_backend_utils").is_dir()
    assert not (old / "sglang/srt/model_executor/runner_backend_utils").exists()
    assert (old / "sglang/srt/model_executor/cuda_graph_runner.py").is_file()
    assert not (new / "sglang/srt/model_executor/cuda_graph_runner.py").exists()
    assert (old / "sglang/srt/speculative/dflash_worker.py").is_file()
    assert not (new / "sglang/srt/speculative/dflash_worker.py").exists()
