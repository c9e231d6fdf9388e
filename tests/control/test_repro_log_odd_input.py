"""Honest outcomes on odd input: traceback frames with no header are a crash at their line; input that is not
text (binary, NUL-filled, mostly invalid UTF-8) is `unreadable`, never clean; a log behind a hole of NULs
(logrotate's copytruncate) is still read."""
import os
import random
from pathlib import Path

import pytest

from gpudiag.repro import logrun
from probes.crashlog.classify import classify
from probes.crashlog.normalize import not_text

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"


def log(name):
    return [ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


def test_header_less_frames_are_an_unclassified_crash_at_their_line():
    served = log("clean_sglang_2468_startup.log")
    frames = log("sglang_2460_headerless_frames_all_gather.log")
    result = classify("\n".join(served + frames))
    assert result["outcome"] == "unclassified_crash"
    crash = result["crashes"][0]
    assert crash["line"] == len(served) + 1 and crash["exception"] is None
    assert [f["function"] for f in crash["last_frames"]] == ["_call_impl", "forward", "tensor_model_parallel_all_gather"]
    one = classify("\n".join(log("sglang_9706_headerless_custom_allreduce_frame.log")))
    assert one["outcome"] == "unclassified_crash" and one["crashes"][0]["last_frames"][0]["function"] == \
        "register_graph_buffers"


@pytest.mark.parametrize("data, why", [
    (random.Random(7).randbytes(200_000) if hasattr(random.Random, "randbytes") else os.urandom(200_000),
     "invalid UTF-8"),
    (b"\x00" * 50_000, "only NUL bytes"),
    (b"ab\x00\x00\x00\x00" * 10_000, "NUL"),
    ("Capture cuda graph begin\n".encode("utf-16"), "NUL"),
])
def test_input_that_is_not_text_is_unreadable_never_clean(data, why):
    text = data.decode("utf-8", errors="replace")
    result = classify(text)
    assert result["outcome"] == "unreadable" and why in result["reason"]
    assert result["crashes"] == []


def test_a_log_behind_a_hole_of_nuls_is_read():
    crash = "\n".join(log("sglang_7011_eagle_draft_extend_capture.log"))
    result = classify("\x00" * 1_000_000 + crash)
    assert result["outcome"] != "unreadable" and result["crashes"][0]["family"] == "capture_failure"


def test_a_few_stray_bytes_do_not_make_a_log_unreadable():
    lines = log("clean_sglang_11830_capture_bars_finished.log")
    lines[3] += " caf\ufffd \x00"
    assert not_text("\n".join(lines)) is None
    assert classify("\n".join(lines))["outcome"] == "clean"


def test_repro_log_refuses_a_binary_file_with_one_line(tmp_path):
    path = tmp_path / "core.bin"
    path.write_bytes(os.urandom(64 * 1024))
    with pytest.raises(logrun.LogUnreadable) as caught:
        logrun.classify_source(str(path))
    assert str(caught.value).startswith(f"--log {path}: not a text log: ")
    assert "\n" not in str(caught.value)
