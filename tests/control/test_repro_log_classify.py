"""How the classifier reads a messy log: CRLF, ANSI colours, tqdm redraws, ranks interleaved, restarts,
the same crash on every rank, secrets in quoted lines. Built from the corpus's real logs."""
from pathlib import Path

from probes.crashlog.classify import classify

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"


def log(name):
    return [line for line in (CORPUS / name).read_text().splitlines() if not line.startswith("#fixture ")]


def test_crlf_colours_and_tqdm_redraws_change_nothing_but_the_bytes():
    plain = log("sglang_1751_capture_flashinfer.log")
    messy = list(plain)
    messy[1] = "\x1b[32m" + messy[1] + "\x1b[0m"
    messy.insert(2, "Capturing batches (bs=160 avail_mem=8.30 GB):  13%|#3   | 3/23\r"
                    "Capturing batches (bs=128 avail_mem=8.29 GB):  17%|#7   | 4/23")
    expected = classify("\n".join(plain))["crashes"][0]
    got = classify("\r\n".join(messy))["crashes"][0]
    assert got["family"] == expected["family"] == "capture_failure"
    assert got["line"] == expected["line"] + 1          # the one inserted progress line
    assert got["last_frames"] == expected["last_frames"]
    assert all("\x1b" not in q["text"] and "\r" not in q["text"] for q in got["quoted"])


def test_the_same_crash_on_every_rank_is_one_report_listing_the_ranks():
    traceback = log("sglang_7011_eagle_draft_extend_capture.log")
    lines = []
    for rank in range(4):
        lines += [traceback[0].replace(" TP0]", " TP%d]" % rank)] + traceback[1:]
    result = classify("\n".join(lines))
    assert result["crashes_total"] == 1
    assert result["crashes"][0]["streams"] == ["TP0", "TP1", "TP2", "TP3"]
    assert "[TP0, TP1, TP2, TP3]" in result["crashes"][0]["summary"]


def test_a_rank_record_inside_another_ranks_traceback_does_not_split_it():
    traceback = log("sglang_7011_eagle_draft_extend_capture.log")
    other = "[2025-06-09 18:16:26 TP1] Load weight end. type=LlamaForCausalLMEagle, dtype=torch.bfloat16"
    lines = traceback[:5] + [other] + traceback[5:]
    crash = classify("\n".join(lines))["crashes"][0]
    assert crash["streams"] == ["TP0"] and crash["family"] == "capture_failure"
    assert crash["last_frames"][-1]["function"] == "_wrapped_call_impl"
    assert crash["last_frames"][-1]["file"] == "torch/nn/modules/module.py"


def test_several_crashes_in_one_log_are_each_reported_in_order():
    first = log("sglang_2468_warmup_failed_after_startup.log")
    second = log("sglang_5285_capture_oom_deepep.log")
    result = classify("\n".join(first + ["restarting"] * 50 + second))
    families = [c["family"] for c in result["crashes"]]
    assert families == ["unclassified", "oom_in_capture"]
    assert result["crashes"][0]["line"] < result["crashes"][1]["line"]
    assert result["crashes"][0]["when"] == "after the server was ready"
    assert result["outcome"] == "known_signature"     # one of them has a signature


def test_unclassified_crash_quotes_the_exception_line_and_last_frames():
    result = classify("\n".join(log("sglang_2468_warmup_failed_after_startup.log")))
    crash = result["crashes"][0]
    assert result["outcome"] == "unclassified_crash"
    assert crash["summary"].startswith("unclassified crash at line 11 (unclassified): AssertionError: res=<Response")
    assert crash["last_frames"] == [{"file": "sglang/srt/server.py", "line": 621, "function": "_wait_and_warmup"}]
    assert {"line": 16, "text": "Killed"} in crash["quoted"] and crash["last_line"] == 16


def test_secrets_in_quoted_lines_are_redacted():
    lines = log("sglang_35437_dflash_breakable_capture_end.log")
    lines[2] = lines[2].replace("DFLASH \\", "DFLASH --api-key sk-live-0123456789abcdef \\")
    lines.insert(0, "[2026-08-19 10:00:00] server_args=ServerArgs(api_key='hunter2-secret', "
                    "speculative_algorithm='DFLASH', model_path='https://user:pa55word@models.example/x')")
    result = classify("\n".join(lines))
    text = repr(result)
    for secret in ("sk-live-0123456789abcdef", "hunter2-secret", "pa55word"):
        assert secret not in text
    assert any("api_key=<redacted>" in q["text"] for q in result["crashes"][0]["quoted"])


def test_a_log_that_stops_inside_capture_is_not_clean():
    result = classify("\n".join(log("sglang_11275_capture_stalls_tp8.log")))
    crash = result["crashes"][0]
    assert result["outcome"] == "unclassified_crash" and crash["family"] == "capture_hang"
    assert crash["line"] == 1 and "without its end, a crash or the server coming up" in crash["summary"]


def test_a_clean_log_says_whether_the_server_came_up():
    up = classify("\n".join(log("clean_sglang_2468_startup.log")))
    assert up["outcome"] == "clean" and up["ready_line"] == 8
    partial = classify("\n".join(log("clean_sglang_10088_eagle_graph_capture.log")))
    assert partial["outcome"] == "clean" and partial["ready_line"] is None


def test_a_crash_followed_by_a_later_start_up_belongs_to_an_earlier_run():
    crash = log("sglang_5285_capture_oom_deepep.log")
    startup = log("clean_sglang_2468_startup.log")
    result = classify("\n".join(crash + startup))
    assert result["crashes"][0]["when"] == "before the server last came up (an earlier run)"
    assert result["last_ready_line"] == len(crash) + 9
