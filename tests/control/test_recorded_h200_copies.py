"""gpudiag's first real-GPU runs (tests/fixtures/recorded/h200-2026-12-04, one H200, no sglang) read back through the
CLI: Q5 states what copy_bench measured, per GPU in both clocks (CPU issue eagerly, GPU stream inside a replayed
graph), says why there is no baseline, and the hidden_states verdict follows the GPU-stream figures as sglang PR
#28465 does (keep hidden_states on its own copy_(): the foreach kernel costs 2-3x its GPU time at these sizes)."""

import json
import re
from pathlib import Path

from click.testing import CliRunner

from gpudiag.cli import cli

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "h200-2026-12-04"
DEEP_280 = next((RECORDED / "deep-timeout-280" / "runs").iterdir())
DEEP_130 = next((RECORDED / "deep-timeout-130" / "runs").iterdir())


def report(*args):
    result = CliRunner().invoke(cli, ["report", *map(str, args)], env={"COLUMNS": "250"})
    assert result.exit_code in (0, 1, 2, 4), result.output
    return result.output


def q5(run):
    doc = json.loads(report(run, "--json"))
    [question] = [q for q in doc["answers"]["questions"] if q["id"] == "Q5"]
    [answer] = question["answers"]
    return answer, doc


def test_q5_states_both_clocks_per_gpu_and_why_there_is_no_baseline():
    answer, _ = q5(DEEP_280)
    assert answer["status"] == "partial" and not answer["answer"].startswith("not checked")
    [gpu] = answer["value"]["gpus"]
    assert gpu["gpu"] == "0" and gpu["basis"] == "the largest batch size measured"
    paths = {p["path"]: p for p in gpu["paths"]}
    assert set(paths) == {"eagle_draft", "eagle_draft_extend", "dflash_verify"}
    draft = paths["eagle_draft"]
    assert (draft["batch_size"], draft["hidden_size"]) == (128, 7168)
    # The recorded medians of eagle_draft/bs128/h7168: eager grouped_foreach 39.372 µs is the best CPU issue; in
    # the replayed graph grouped_foreach_dma_split 4.498 µs beats grouped_foreach's 11.293 µs.
    assert draft["best"] == {"cpu_issue": {"strategy": "grouped_foreach", "us": 39.372},
                             "gpu_stream": {"strategy": "grouped_foreach_dma_split", "us": 4.498}}
    assert draft["baseline"] is None and draft["saving_us_per_replay"] is None
    assert "no sglang release was read" in draft["no_baseline"]
    assert "sglang is not importable" in draft["no_baseline"]
    text = answer["answer"]
    assert "eagle_draft bs 128 h7168: best grouped_foreach 39.4 µs CPU issue / grouped_foreach_dma_split 4.5 µs " \
           "GPU stream" in text
    assert text.count("no baseline — no sglang release was read") == 1        # said once for the GPU
    assert "no workload was measured" not in text


def test_the_hidden_states_verdict_agrees_with_pr_28465_on_the_recorded_gpu_time():
    answer, doc = q5(DEEP_280)
    verdict = answer["value"]["hidden_states"]
    assert verdict["clock"] == "gpu_stream" and verdict["keep"] == "copy_()"
    assert 2.0 <= verdict["ratio_median"] <= 3.0 and verdict["workloads"] == 16
    assert "keep hidden_states on its own copy_(), as sglang PR #28465" in answer["answer"]
    [finding] = [f for f in doc["findings"] if f["id"] == "copies.hidden_states_measured"]
    assert finding["recommendation"].startswith("Keep hidden_states on its own copy_(), as sglang PR #28465")
    rows = {row[1]: row for row in finding["evidence"][0]["table"][1:]}
    assert rows["eagle_draft/bs8/h7168"][-1] == "2.58"   # 9.758 / 3.777 µs inside the replayed graph


def test_console_and_markdown_say_the_same_and_no_answer_misses_data_the_run_holds(tmp_path):
    console = report(DEEP_280)
    flat = re.sub(r"[\s│┃]+", " ", console)
    assert "Q5" in console and "not checked — no workload was measured" not in flat
    assert "grouped_foreach_dma_split 4.5 µs GPU stream" in flat
    out = tmp_path / "FINDINGS.md"
    report(DEEP_280, "--markdown", "-o", out, "--no-charts")
    markdown = out.read_text(encoding="utf-8")
    answer, _ = q5(DEEP_280)
    assert answer["answer"].split(" (1 replay")[0] in markdown
    appendix = out.with_name("FINDINGS.appendix.md").read_text(encoding="utf-8")
    assert "| eagle_draft/bs8/h7168 |" in appendix
    assert "fastest grouped_foreach_size_split (CPU issue) / grouped_foreach_dma_split (GPU stream)" in appendix
    for run in (DEEP_280, DEEP_130):   # both recorded deep runs measured 20 workloads
        answer, _ = q5(run)
        assert not answer["answer"].startswith("not checked"), run
