"""Every repro cell failure goes through the one crash-log classifier: a cell's signature and family are
what `gpudiag repro --log` gives for the same text, and its advice is worded for the installed release."""
import json
import os

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from probes.crashlog.cell import classify_cell
from probes.graphrepro import results, sglang_repro, synthetic, synthetic_cell

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGS = os.path.join(ROOT, "tests", "fixtures", "logs")
CORPUS = os.path.join(LOGS, "corpus")


def repro_log(tmp_path, text):
    """`gpudiag repro cuda-graph-crash --log FILE --json`: the control side's reading of the same text."""
    path = tmp_path / "cell.log"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["repro", "cuda-graph-crash", "--log", str(path), "--json",
                                      "--reports-dir", str(tmp_path / "reports")])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def first_named(block):
    crashes = block["crashes"]
    return next((c for c in crashes if c["signature"]), crashes[0] if crashes else None)


@pytest.mark.parametrize("name,signature", [
    ("dflash_capture_end_assert.log", "capture_end_no_active_capture"),
    ("eagle_capture_failed_oom.log", "oom_during_capture"),
    ("eagle3_replay_none_copy.log", "replay_input_copy_none"),
    ("b300_eagle_draft_capture.log", "sm103_eagle_draft_capture"),
])
def test_a_cell_names_the_signature_and_family_repro_log_gives(tmp_path, name, signature):
    with open(os.path.join(LOGS, name)) as handle:
        text = handle.read()
    verdict = classify_cell(text)
    crash = first_named(repro_log(tmp_path, text))
    assert verdict["signature"]["name"] == crash["signature"]["name"] == signature
    assert verdict["family"] == crash["family"] and verdict["phase"] == crash["detail"]
    assert verdict["signature"]["recommendation"] == crash["signature"]["recommendation"]
    assert verdict["signature"]["lines"] == crash["quoted"]


def test_the_gpu_the_cell_ran_on_takes_part_in_requires_and_is_never_quoted():
    text = "RuntimeError: Capture cuda graph failed: CUDA error: unspecified launch failure (EAGLE draft)"
    plain = classify_cell(text)
    assert plain["family"] == "device_fault" and plain["signature"] is None
    on_b300 = classify_cell(text, known="compute capability sm_103")
    assert on_b300["signature"]["name"] == "sm103_eagle_draft_capture"
    assert on_b300["signature"]["lines"] == [{"line": 1, "text": text}]


class ClosingWorker(object):
    closed = 0

    def close(self):
        self.closed += 1


def raised(message):
    """A real exception with a real traceback, as the synthetic child's `_failure` records it."""
    def capture_one_batch_size():
        raise RuntimeError(message)
    try:
        capture_one_batch_size()
    except RuntimeError as exc:
        return synthetic._failure("capture", exc)


def test_a_synthetic_capture_failure_gets_the_installed_releases_flags(tmp_path):
    result = raised("Capture cuda graph failed: something odd")
    assert result["status"] == "capture_failed" and result["traceback"][0].startswith("Traceback")
    worker = ClosingWorker()
    old = synthetic_cell.synthetic_cell(result, "eagle_draft", "EAGLE", 4, 8, "0.5.11", "", worker)
    new = synthetic_cell.synthetic_cell(result, "eagle_draft", "EAGLE", 4, 8, "0.5.23", "", worker)
    assert worker.closed == 2   # a failed cell never reuses its child
    for cell in (old, new):
        assert cell["status"] == "capture_failed" and cell["family"] == "capture_failure"
        assert cell["signature"]["name"] == "capture_failed"
    assert "--cuda-graph-max-bs " in old["signature"]["recommendation"]
    assert "--cuda-graph-max-bs-decode" in new["signature"]["recommendation"]
    assert old["advice_assumes"] == "sglang 0.5.11 (before 0.5.14)"
    assert new["advice_assumes"] == "sglang 0.5.23 (0.5.14+)"
    # The same text through `repro --log`: the same signature and family (its advice names both spellings,
    # since the log alone does not say which release wrote it).
    crash = first_named(repro_log(tmp_path, "\n".join(new["log_excerpt"])))
    assert (crash["signature"]["name"], crash["family"]) == ("capture_failed", "capture_failure")
    assert "--cuda-graph-max-bs-decode (0.5.14+) or --cuda-graph-max-bs" in crash["signature"]["recommendation"]


def test_a_child_killed_by_a_signal_is_a_device_fault_with_the_native_crash_signature(tmp_path):
    result = {"status": "died", "detail": "child killed by SIGSEGV", "signal": "SIGSEGV", "exit_code": -11,
              "log_tail": "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call "
                          "first):\n  File \"/venv/lib/python3.10/site-packages/torch/cuda/graphs.py\", line 88 in "
                          "replay\n"}
    cell = synthetic_cell.synthetic_cell(result, "dflash_verify", "DFLASH", 16, 8, None, "", ClosingWorker())
    assert cell["status"] == "device_fault" and cell["signature"]["name"] == "native_crash"
    assert cell["log_excerpt"][-1] == "child killed by SIGSEGV"
    crash = first_named(repro_log(tmp_path, "\n".join(cell["log_excerpt"])))
    assert crash["signature"]["name"] == "native_crash" and crash["family"] == cell["family"]


def test_a_device_fault_text_makes_the_cell_a_device_fault():
    result = raised("CUDA error: an illegal memory access was encountered")
    assert result["status"] == "device_fault"   # the child's own reading, from the classifier's family rules
    cell = synthetic_cell.synthetic_cell(result, "eagle_draft", "EAGLE", 4, 8, None, "", ClosingWorker())
    assert cell["status"] == "device_fault" and cell["family"] == "device_fault"
    assert cell["signature"]["name"] == "illegal_memory_access_capture"    # raised in capture_one_batch_size


def test_ok_and_mismatch_cells_are_not_classified():
    worker = ClosingWorker()
    ok = synthetic_cell.synthetic_cell({"status": "ok", "max_abs_diff": 0.0}, "eagle_draft", "EAGLE", 1, 2, None, "",
                                   worker)
    mismatch = synthetic_cell.synthetic_cell({"status": "mismatch", "detail": "graph replay differs from eager by 3"},
                                         "eagle_draft", "EAGLE", 1, 2, None, "", worker)
    assert ok["signature"] is None and "family" not in ok and worker.closed == 1
    assert mismatch["signature"] is None and "family" not in mismatch


def test_a_server_that_died_of_an_import_error_is_not_a_capture_failure():
    """sglang #5100: an undefined symbol at import; the log also shows graph words nowhere near the crash."""
    with open(os.path.join(CORPUS, "sglang_5100_import_error_undefined_symbol.log")) as handle:
        text = "".join(line for line in handle if not line.startswith("#fixture "))
    status, detail, verdict = sglang_repro.classify("died", [], False, None, False, text)
    assert status == "error" and "not in graph code" in detail
    assert verdict["family"] == "not_a_graph_problem" and verdict["signature"] is None


def test_a_healthy_server_whose_log_shows_acceptance_stuck_keeps_the_note():
    text = "[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 8, #token: 900, accept len: 1.00"
    answered = [{"ok": True, "completion_tokens": 32, "spec_verify_ct": 32}]
    status, _, verdict = sglang_repro.classify("ready", answered, True, 1.0, True, text)
    assert status == "silent_failure" and verdict["note"]["name"] == "acceptance_stuck_at_one"
    assert verdict["signature"] is None


def test_the_repro_console_says_which_release_the_advice_assumes():
    import io
    from rich.console import Console
    from gpudiag.cli.repro import _print_host
    from gpudiag.repro.summary import HostRepro
    cell = synthetic_cell.synthetic_cell(raised("Capture cuda graph failed: something odd"), "eagle_draft", "EAGLE", 4,
                                     8, "0.5.11", "", ClosingWorker())
    data = {"cells": [cell], "boundaries": [], "notes": []}
    results.summarise(data, "sm_90")
    assert data["signatures"][0]["advice_assumes"] == "sglang 0.5.11 (before 0.5.14)"
    out = io.StringIO()
    _print_host(Console(file=out, width=250, color_system=None), HostRepro("h", True, "", data))
    assert "advice (assumes sglang 0.5.11 (before 0.5.14)): Lower --cuda-graph-max-bs (e.g. 32" in out.getvalue()
