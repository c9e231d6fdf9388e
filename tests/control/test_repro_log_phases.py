"""Phases from evidence: the capture start and end lines of every release (read from the wheels' own logger
calls) are capture events; a log cut after any start is a capture hang and one ending on a bar at 100% is
not; signatures that name a phase or a graph need that evidence (NCCL timeouts, capture-time faults,
`StreamCapture` inside the allocator's frames). Built from the corpus's real logs."""
import re
from pathlib import Path

import pytest

from probes.crashlog import phases
from probes.crashlog.classify import classify
from tests.sglang_wheels import SkipWheel, site_packages_for

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
RELEASES = ("0.2.15", "0.3.0", "0.4.6", "0.4.10", "0.5.11", "0.5.14", "0.5.23")
# A logger call's message that starts a capture line: "Capture …" up to the first placeholder or quote end.
LOGGED = re.compile(r"""f?["'](Capture [^"'{]*?(?:\{[^}]*\}[^"'{]*?)*? (?:begin|end)\b[^"']*)["']""")


def log(name):
    return [ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


def logged_capture_messages(version):
    try:
        site = site_packages_for(version)
    except SkipWheel as exc:
        pytest.skip(str(exc))
    found = set()
    for path in (site / "sglang").rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "Capture " not in text:
            continue
        for message in LOGGED.findall(text):
            # Placeholders become words, as they print: "{capture_name}" -> "target decode".
            found.add(re.sub(r"\{[^}]*\}", "target decode", message))
    return found


@pytest.mark.parametrize("version", RELEASES)
def test_every_capture_line_a_release_logs_is_a_capture_event(version):
    messages = logged_capture_messages(version)
    assert any(" begin" in m for m in messages), sorted(messages)
    # 0.2-0.3 log no end line: the server coming up ends the capture (below).
    assert any(" end" in m for m in messages) == (version >= "0.4"), sorted(messages)
    for message in messages:
        found = phases.CAPTURE_EVENT.search(message)
        assert found and found.group("edge") in ("begin", "end"), (version, message)


def test_a_log_cut_after_draft_extend_capture_began_is_a_capture_hang():
    startup = log("clean_sglang_2468_startup.log")[:4]        # target capture begins and ends
    cut = startup + ["[2025-06-09 18:16:26 TP0] Capture draft extend cuda graph begin. This can take up to several "
                     "minutes. avail mem=10.20 GB"]
    crash = classify("\n".join(cut))["crashes"][0]
    assert (crash["family"], crash["line"]) == ("capture_hang", 5)


def test_a_log_ending_on_a_finished_capture_bar_is_not_a_hang():
    began = log("sglang_11275_capture_stalls_tp8.log")[:2]
    bar = log("clean_sglang_11830_capture_bars_finished.log")[0]
    assert classify("\n".join(began + [bar]))["outcome"] == "clean"
    unfinished = bar.replace("100%", " 40%").replace("52/52", "21/52")
    assert classify("\n".join(began + [unfinished]))["crashes"][0]["family"] == "capture_hang"
    # A bar under way with no begin line before it is capture evidence too.
    assert classify(unfinished)["crashes"][0]["family"] == "capture_hang"


def test_nccl_timeouts_are_in_a_graph_only_while_a_capture_is_open():
    watchdog = log("sglang_3836_nccl_allreduce_watchdog_in_nccl_info.log")
    outside = classify("\n".join(watchdog))["crashes"][0]
    assert (outside["family"], outside["detail"], outside["signature"]["name"]) == \
        ("nccl", "", "nccl_collective_timeout")
    assert "graph" in outside["signature"]["meaning"] and "does not tie it to graphs" in outside["signature"]["meaning"]
    during = log("sglang_11275_capture_stalls_tp8.log")[:3] + [watchdog[4].replace("[rank4]:", "[rank0]:")]
    crash = classify("\n".join(during))["crashes"][0]
    assert (crash["family"], crash["detail"], crash["signature"]["name"]) == ("nccl", "capture", "nccl_in_graph_hang")
    after = log("clean_sglang_11830_capture_bars_finished.log") + [watchdog[4]]
    assert classify("\n".join(after))["crashes"][0]["signature"]["name"] == "nccl_collective_timeout"


def test_a_capture_time_fault_never_gets_a_replay_signature():
    for name in ("sglang_1467_capture_illegal_memory_access.log", "sglang_5029_capture_illegal_memory_access_h200.log"):
        crash = classify("\n".join(log(name)))["crashes"][0]
        assert crash["detail"] == "capture" and not crash["signature"]["name"].endswith("_replay"), name


def test_stream_capture_in_the_allocators_frames_is_no_capture_evidence():
    lines = log("sglang_26987_replay_illegal_memory_access_b300.log")
    assert any("currentStreamCaptureStatusMayInitCtx" in ln for ln in lines)
    crash = classify("\n".join(lines))["crashes"][0]
    assert (crash["family"], crash["detail"], crash["signature"]["name"]) == ("device_fault", "", "illegal_memory_access")


def test_phase_free_signatures_never_name_a_crash_in_capture():
    """Their meaning says the log shows no graph: a fault inside capture gets the capture one, or none."""
    crash = classify("RuntimeError: Capture cuda graph failed: CUDA error: unspecified launch failure")["crashes"][0]
    assert (crash["family"], crash["detail"], crash["signature"]) == ("device_fault", "capture", None)


def test_a_fault_in_graph_replay_frames_keeps_the_replay_signature():
    lines = log("sglang_26987_replay_illegal_memory_access_b300.log")
    frames = ['Traceback (most recent call last):',
              '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 801, in replay',
              '    self.graphs[self.bs].replay()']
    crash = classify("\n".join(frames + lines))["crashes"][0]
    assert (crash["detail"], crash["signature"]["name"]) == ("replay", "illegal_memory_access_replay")


def test_without_end_lines_the_server_coming_up_ends_the_capture():
    """0.2-0.3 log "Capture cuda graph begin" and never its end: a later crash is not in capture."""
    served = log("clean_sglang_1467_served_0_3_layout.log")
    began = "[15:57:40 TP0] Capture cuda graph begin. This can take up to several minutes."
    fault = "[15:59:10 TP0] RuntimeError: CUDA error: an illegal memory access was encountered"
    crash = classify("\n".join([began] + served + [fault]))["crashes"][0]
    assert (crash["family"], crash["detail"], crash["signature"]["name"]) == \
        ("device_fault", "", "illegal_memory_access")
    cut = classify("\n".join([began, fault]))["crashes"][0]
    assert (cut["detail"], cut["signature"]["name"]) == ("capture", "illegal_memory_access_capture")
