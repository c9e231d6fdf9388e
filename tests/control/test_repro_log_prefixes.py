"""Collectors' prefixes come off before any rule: every corpus log read through docker compose, podman-compose,
kubectl --prefix, journald, the kubelet's CRI files, docker --timestamps, Ray or a script's logger gives the
same verdict, family, lines and frames as the bare log; two services' tracebacks never mix."""
from pathlib import Path

import pytest

from probes.crashlog import prefixes
from probes.crashlog.classify import classify

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
WRAPPERS = {
    "compose": "llm0-1  | ",
    "compose_long": "deepseek-r1-1  | ",
    "podman_compose": "[llm0]    | ",
    "kubectl": "[pod/sglang-0/server] ",
    "journald": "Mar 07 10:00:00 gpu-1 python3[4242]: ",
    "journald_iso": "2025-03-07T10:00:00+0000 gpu-1 sglang[4242]: ",
    "cri": "2025-07-25T07:53:08.21748708+08:00 stdout F ",
    "docker_timestamps": "2025-07-25T07:53:08.217487081Z ",
    "ray": "(SGLangEngine pid=952, ip=10.150.236.219) ",
    "logging": "2025-03-07 10:00:00,123 - supervisor - INFO - ",
    "compose_and_timestamps": "llm0-1  | 2025-07-25T07:53:08.217487081Z ",
}
# Logs whose own lines already carry a collector's prefix or need their exact layout stay bare.
BARE_ONLY = {"sglang_8336_mtp_cri_log_file", "sglang_6309_eagle_serving_ray_prefix", "sglang_4017_k9s_frame",
             "sglang_3932_nccl_timeout_bracketed_time"}


def bare(path):
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


def shape(result, prefix=""):
    """What must not change; quoted lines keep the prefix (they show the line as the file has it)."""
    def exception(crash):
        text = crash["exception"]["text"] if crash["exception"] else None
        text = text[len(prefix.strip()):].strip() if text and prefix else text
        return text[:200] if text else text      # quotes are cut at 300 characters, prefix included
    return [(c["line"], c["family"], c["detail"], (c["signature"] or {}).get("name"),
             [f["function"] for f in c["last_frames"]], exception(c))
            for c in result["crashes"]], result["outcome"], result["ready_line"]


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_every_corpus_log_reads_the_same_through_a_collector(wrapper):
    checked = 0
    for path in sorted(CORPUS.glob("*.log")):
        if path.stem in BARE_ONLY:
            continue
        lines = bare(path)
        expected = shape(classify("\n".join(lines)))
        expected = (expected[0], expected[1], expected[2])
        got = shape(classify("\n".join(WRAPPERS[wrapper] + ln for ln in lines)), WRAPPERS[wrapper])
        assert got == expected, path.stem
        checked += 1
    assert checked >= 35


def test_the_capture_failure_inside_a_compose_log_is_read():
    """Without the prefix off, the log was one unclassified crash and `Capture cuda graph failed` went unread."""
    lines = bare(CORPUS / "sglang_5029_capture_illegal_memory_access_h200.log")
    result = classify("\n".join("deepseek-r1-1  | " + ln for ln in lines))
    crash = result["crashes"][0]
    assert (crash["family"], crash["detail"], crash["signature"]["name"]) == \
        ("device_fault", "capture", "illegal_memory_access_capture")
    assert crash["streams"] == ["deepseek-r1-1"]


def test_two_services_interleaved_are_two_streams():
    one = bare(CORPUS / "sglang_7011_eagle_draft_extend_capture.log")
    other = bare(CORPUS / "sglang_2468_warmup_failed_after_startup.log")
    mixed = []
    for index in range(max(len(one), len(other))):
        if index < len(one):
            mixed.append("llm0-1  | " + one[index])
        if index < len(other):
            mixed.append("llm1-1  | " + other[index])
    result = classify("\n".join(mixed))
    families = sorted((c["streams"][0].split("/")[0], c["family"]) for c in result["crashes"])
    assert families == [("llm0-1", "capture_failure"), ("llm1-1", "unclassified")]


@pytest.mark.parametrize("line, rest, stream", [
    ("llm0-1  | Traceback (most recent call last):", "Traceback (most recent call last):", "llm0-1"),
    ("[pod/sglang-0/server] [2025-01-01 00:00:00 TP0] x", "[2025-01-01 00:00:00 TP0] x", "pod/sglang-0"),
    ("Dez 28 06:43:00 XXX mail_on_failure[9777]: Traceback", "Traceback", "mail_on_failure[9777]"),
    ("2025-06-19T08:18:45.701Z ERROR scheduler.run_scheduler_process: Scheduler hit an exception",
     "Scheduler hit an exception", ""),
    ("INFO 02-22 08:52:08 __init__.py:190] Automatically detected platform cuda.",
     "Automatically detected platform cuda.", ""),
    ("ERROR:root:boom", "boom", ""),
    ("\u2502   File \"/x.py\", line 1, in f        \u2502", "  File \"/x.py\", line 1, in f", ""),
    ("| Option | Value |", "| Option | Value |", ""),
    ("Capture cuda graph bs [1, 2] | x", "Capture cuda graph bs [1, 2] | x", ""),
])
def test_each_prefix_comes_off_and_names_its_stream(line, rest, stream):
    assert prefixes.strip(line) == (rest, stream)
