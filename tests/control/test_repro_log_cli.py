"""Logs from the wild through the real command line, `gpudiag repro cuda-graph-crash --log FILE`: the verdict,
the signature, the stream and the exit code (0 clean, 1 crash, 2 unreadable) for each shape the classifier
reads: collectors' prefixes, device-side asserts, NCCL outside graphs, phases, odd input, old releases."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "logs" / "corpus"


def log(name):
    return [ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


def gpudiag(path, reports):
    return subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", "repro", "cuda-graph-crash",
                           "--log", str(path), "--reports-dir", str(reports)],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))


def compose(lines):
    return ["deepseek-r1-1  | " + ln for ln in lines]


def journald(lines):
    return ["Mar 07 10:00:00 gpu-1 python3[4242]: " + ln for ln in lines]


CASES = {
    "compose_capture_fault": (lambda: compose(log("sglang_5029_capture_illegal_memory_access_h200.log")), 1,
                              ["crash 1: illegal_memory_access_capture at line 1 [deepseek-r1-1]: Exception: "
                               "Capture cuda graph failed: RuntimeError: CUDA error: an illegal memory access",
                               "  family: device_fault (capture), during start-up"]),
    "device_side_assert": (lambda: log("sglang_15638_eagle_v2_vectorized_gather_assert.log"), 1,
                           ["crash 1: device_side_assert at line 1: /pytorch/aten/src/ATen/native/cuda/"
                            "IndexKernelUtils.cu:16: vectorized_gather_kernel",
                            "  family: device_fault, when is not shown (no start-up or serving line before it)"]),
    "nccl_outside_graphs": (lambda: log("sglang_3836_nccl_allreduce_watchdog_in_nccl_info.log"), 1,
                            ["crash 1: nccl_collective_timeout at line 5 [rank4]:",
                             "  family: nccl, when is not shown (no start-up or serving line before it)"]),
    "headerless_frames": (lambda: log("sglang_2460_headerless_frames_all_gather.log"), 1,
                          ["crash 1: unclassified crash at line 1 (unclassified): "]),
    "bars_finished": (lambda: log("sglang_11275_capture_stalls_tp8.log")[:2]
                      + log("clean_sglang_11830_capture_bars_finished.log")[:1], 0,
                      ["clean: no crash in 3 lines; the log does not show the server coming up"]),
    "draft_extend_cut": (lambda: log("clean_sglang_2468_startup.log")[:4]
                         + ["[2025-06-09 18:16:26 TP0] Capture draft extend cuda graph begin. This can take up to "
                            "several minutes. avail mem=10.20 GB"], 1,
                         ["crash 1: unclassified crash at line 5 [TP0] (capture_hang): CUDA-graph capture began here"]),
    "old_release_advice": (lambda: ["[15:57:40 TP0] Capture cuda graph begin. This can take up to several minutes."]
                           + log("sglang_1467_capture_illegal_memory_access.log"), 1,
                           ["advice assumes sglang before 0.3.4 (the log's records carry the time without the date",
                            "  advice: Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; try another attention "
                            "backend; capture fewer batch sizes (a smaller CUDA-graph batch-size limit (this release "
                            "has no flag for it; later ones do)); start with --disable-cuda-graph"]),
    "journald_sigquit_typo": (lambda: journald(log("clean_sglang_11830_capture_bars_finished.log") + [
        "[2025-02-10 08:00:00] Received sigquit from a child proces. It usually means the child failed."]), 1,
        ["crash 1: unclassified crash at line 11 [python3[4242]] (unclassified): Received sigquit from a child proces.",
         "  /LOG:11: Mar 07 10:00:00 gpu-1 python3[4242]: [2025-02-10 08:00:00] Received sigquit from a child proces."]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_wild_log_through_the_command_line(name, tmp_path):
    make, code, expected = CASES[name]
    path = tmp_path / f"{name}.log"
    path.write_text("\n".join(make()) + "\n", encoding="utf-8")
    proc = gpudiag(path, tmp_path / "reports")
    assert proc.returncode == code, proc.stdout + proc.stderr
    for text in expected:
        text = text.replace("/LOG", str(path))
        assert text in proc.stdout, (text, proc.stdout)
    if name == "nccl_outside_graphs":
        assert "nccl_in_graph_hang" not in proc.stdout and "does not tie it to graphs" in proc.stdout


def test_a_binary_file_is_unreadable_with_exit_2_and_one_line(tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes(os.urandom(256 * 1024))
    proc = gpudiag(path, tmp_path / "reports")
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpudiag: error: --log {path}: not a text log: ")
    assert "Traceback" not in proc.stderr and not (tmp_path / "reports" / "runs").exists()
