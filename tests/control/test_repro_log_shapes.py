"""Shapes of crash logs from public reports, each built from real lines (the corpus's, or lines quoted in the
issue named beside them): native fault lines with no Python traceback, quoted and dedented logs, interleaved
output, torch.compile and piecewise graphs failing, the phase a crash happened in, and which crashes may be
blamed on CUDA graphs. `repro --log` reads them the same way through the command line."""
import subprocess
import sys
from pathlib import Path

import pytest

from probes.crashlog.classify import classify

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "logs" / "corpus"


def log(name):
    return [ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


CLEAN = log("clean_sglang_2468_startup.log")

# Fault lines printed without a Python traceback after them, as the reports quote them.
NATIVE_LINES = {
    # sglang #6017: DeepEP's kernel assert, every rank, nothing after it.
    "deepep_assert": ("Assertion failed: /sgl-workspace/DeepEP/csrc/kernels/internode.cu:483, condition: "
                      "ibgda_get_state()->num_rc_per_pe >= num_channels", "device_fault", "device_side_assert"),
    # sglang #31864: FlashInfer's TRT-LLM batched GEMM runner on sm100.
    "gemm": ("Error occurred when running GEMM! (numBatches:  256 , GemmMNK:  2224   512   6144 ,", "unclassified",
             "kernel_run_failed"),
    # pytorch #20788: a C++ exception ending the process.
    "terminate": ("terminate called after throwing an instance of 'c10::Error'", "native_crash",
                  "native_crash_outside_graphs"),
    # ROCm/aiter #2059 (GLM-5 under SGLang on MI355): the ROCm runtime's fault line.
    "rocm_memory_fault": ("Memory access fault by GPU node-7 (Agent handle: 0x20916760) on address (nil). Reason: "
                          "Unknown.", "device_fault", "illegal_memory_access"),
    # sglang #5775 (MI100): HIP's runtime error.
    "hip_error": ("RuntimeError: HIP error: invalid device function", "unclassified", None),
    # vllm #20007 (ROCm): the HSA runtime aborting a queue.
    "hsa_error": (":0:rocdevice.cpp            :3020: 5875275709338d us: Callback: Queue 0x7f4580c00000 aborting "
                  "with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.",
                  "device_fault", None),
}


@pytest.mark.parametrize("name", sorted(NATIVE_LINES))
def test_a_native_fault_line_alone_is_a_crash_wherever_it_lands(name):
    line, family, signature = NATIVE_LINES[name]
    for at in (0, len(CLEAN) // 2, len(CLEAN)):
        result = classify("\n".join(CLEAN[:at] + [line] + CLEAN[at:]))
        assert result["outcome"] != "clean", (name, at)
        [crash] = result["crashes"]
        assert crash["line"] == at + 1 and crash["family"] == family
        assert (crash["signature"] or {}).get("name") == signature


def test_the_native_crashes_of_the_corpus_are_not_blamed_on_graphs():
    """An NCCL-init segfault (sglang #28299) and an NGRAM trie abort (sglang #36495) show no capture or replay."""
    for name in ("sglang_28299_nccl_init_segfault_interleaved.log", "sglang_36495_ngram_trie_abort.log"):
        [crash] = classify("\n".join(log(name)))["crashes"]
        signature = crash["signature"]
        assert crash["detail"] == "" and signature["name"] == "native_crash_outside_graphs"
        assert "--disable-cuda-graph" not in signature["recommendation"]
        assert "shows no CUDA-graph capture or replay around it, so it is not known to be a graph problem" \
            in signature["meaning"] and "often a replay" not in signature["meaning"]


def test_a_native_crash_with_a_replay_frame_keeps_the_graph_advice():
    text = "\n".join(["Fatal Python error: Segmentation fault", "",
                      "Current thread 0x00007f (most recent call first):",
                      '  File "/venv/lib/python3.10/site-packages/torch/cuda/graphs.py", line 88 in replay'])
    [crash] = classify(text)["crashes"]
    assert crash["detail"] == "replay" and crash["signature"]["name"] == "native_crash"
    assert "--disable-cuda-graph" in crash["signature"]["recommendation"]


def test_interleaved_faulthandler_dumps_are_one_crash_headed_by_the_fatal_error():
    [crash] = classify("\n".join(log("sglang_28299_nccl_init_segfault_interleaved.log")))["crashes"]
    assert crash["headline"].startswith("Fatal Python error: Fatal Python error: Segmentation fault")
    assert crash["when"] == "during start-up"


def test_a_quoted_log_reads_as_the_log_itself():
    plain = log("sglang_2468_warmup_failed_after_startup.log")
    for quote in ("> ", "> > "):
        quoted = classify("\n".join(quote + ln if ln else ">" for ln in plain))
        [want], [got] = classify("\n".join(plain))["crashes"], quoted["crashes"]
        assert got["headline"] == want["headline"] == "AssertionError: res=<Response [502]>, res.text=''"
        assert (got["family"], got["when"], got["last_frames"]) == (want["family"], want["when"], want["last_frames"])
        assert not got["headline"].startswith("File")


def test_a_quoted_decode_line_still_dates_the_crash_while_serving():
    """sglang #18785 quotes its log with `> ` on the first line only."""
    lines = ["> [2026-02-12 11:38:29 TP0 EP0] Prefill batch, #new-seq: 5, #new-token: 8192, #cached-token: 159358, "
             "token usage: 0.13, #running-req: 18, #queue-req: 5, "] + log("sglang_4584_rank_watchdog_illegal_memory_access.log")
    [crash] = classify("\n".join(lines))["crashes"]
    assert crash["when"] == "while serving" and crash["family"] == "device_fault"


def test_an_unindented_traceback_stays_one_crash():
    """The gloo failure of sglang #4205 with every line's indentation gone (a dedented quote)."""
    indented = log("sglang_4205_capture_gloo_connection_closed.log")
    want = classify("\n".join(indented))["crashes"]
    got = classify("\n".join(ln.lstrip() for ln in indented))["crashes"]
    assert len(got) == len(want) == 1
    assert got[0]["exception"]["text"] == want[0]["exception"]["text"]
    assert got[0]["exception"]["text"].startswith("Exception: Capture cuda graph failed: [../third_party/gloo/")
    assert (got[0]["family"], got[0]["detail"]) == (want[0]["family"], want[0]["detail"]) == ("nccl", "capture")
    assert [f["function"] for f in got[0]["last_frames"]] == [f["function"] for f in want[0]["last_frames"]]


def test_a_torch_compile_pass_inside_the_graph_runner_is_a_capture_failure_after_the_parents_sigquit():
    """sglang #29562: the parent's sigquit is printed before the rank's traceback; one crash, in capture."""
    [crash] = classify("\n".join(log("sglang_29562_prefill_graph_torch_compile_pass.log")))["crashes"]
    assert (crash["family"], crash["detail"]) == ("capture_failure", "capture")
    assert crash["headline"] == "Scheduler hit an exception: Traceback (most recent call last):"
    assert crash["last_frames"][-1]["function"] == "_run_compile_pass"


def test_piecewise_failures_are_capture_at_start_up_and_replay_on_a_served_batch():
    start_up = classify("\n".join(log("sglang_27811_amd_piecewise_startup.log")))["crashes"][0]
    serving = classify("\n".join(log("sglang_23351_piecewise_failed_while_serving.log")))["crashes"][0]
    assert (start_up["family"], start_up["detail"], start_up["when"]) == ("capture_failure", "capture",
                                                                         "during start-up")
    assert (serving["family"], serving["detail"], serving["when"]) == ("replay_failure", "replay", "while serving")
    for crash in (start_up, serving):
        assert crash["signature"]["name"] == "piecewise_cuda_graph_failed"
    # The piecewise line alone, after the server served a Decode batch: the served batch is the evidence.
    decode = log("clean_sglang_19712_serving_without_headers.log")
    line = log("sglang_23351_piecewise_failed_while_serving.log")[0]
    [crash] = classify("\n".join(decode + [line]))["crashes"]
    assert (crash["detail"], crash["when"]) == ("replay", "while serving")
    [crash] = classify(line)["crashes"]
    assert crash["detail"] == "capture"


def test_the_phase_comes_from_the_last_serving_line_and_a_restart_resets_it():
    lines = log("sglang_6624_crash_after_prefill_lines.log")
    assert classify("\n".join(lines))["crashes"][0]["when"] == "while serving"
    restarted = lines[:3] + ["[2025-05-26 07:50:00] server_args=ServerArgs(model_path='/m', tp_size=4)"] + lines[3:]
    assert classify("\n".join(restarted))["crashes"][0]["when"] == "during start-up"
    blank = log("sglang_3724_crash_after_prefill_blank_lines.log")
    assert classify("\n".join(blank))["crashes"][0]["when"] == "while serving"


def test_a_launcher_and_a_log_export_prefix_come_off():
    launched = classify("\n".join(log("sglang_13912_launcher_prefix_hicache_pd.log")))["crashes"][0]
    assert launched["streams"] == ["sh@<0,0>"] and launched["last_frames"][0]["function"] == "run_scheduler_process"
    exported = classify("\n".join(log("sglang_7639_gloo_closed_loki_export.log")))["crashes"][0]
    assert exported["headline"].startswith("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc")
    assert exported["family"] == "nccl" and exported["line"] == 3      # the parent's report of the child's exit
    assert any("Child process unexpectedly failed with an exit code 131" in q["text"] for q in exported["quoted"])


def gpudiag(path, reports):
    return subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", "repro", "cuda-graph-crash",
                           "--log", str(path), "--reports-dir", str(reports)],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))


def test_the_command_line_reads_a_deepep_assert_and_a_quoted_log(tmp_path):
    deepep = tmp_path / "deepep.log"
    deepep.write_text("\n".join(log("sglang_6017_deepep_internode_assert_no_traceback.log")) + "\n")
    proc = gpudiag(deepep, tmp_path / "r")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "crash 1: device_side_assert at line 1: Assertion failed: /sgl-workspace/DeepEP/csrc/kernels/" \
           "internode.cu:483, condition: " in proc.stdout
    quoted = tmp_path / "quoted.log"
    quoted.write_text("\n".join("> " + ln for ln in log("sglang_23351_piecewise_failed_while_serving.log")) + "\n")
    proc = gpudiag(quoted, tmp_path / "r")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "crash 1: piecewise_cuda_graph_failed at line 1 [TP6]: Piecewise CUDA Graph failed with error" in proc.stdout
    assert "  family: replay_failure (replay), while serving" in proc.stdout


def test_a_none_attribute_error_without_a_replay_frame_is_not_blamed_on_the_replay_copy():
    """sglang #36352's NGRAM warm-up error after a start-up whose server_args name CUDA graphs: no replay frame."""
    lines = log("../clean_eagle_server.log") + log("sglang_36352_ngram_torch_native_warmup_none.log")
    assert "cuda_graph" in "\n".join(lines)
    [crash] = classify("\n".join(lines))["crashes"]
    assert crash["signature"] is None and crash["family"] == "unclassified"
    replayed = log("../eagle3_replay_none_copy.log")
    assert classify("\n".join(replayed))["crashes"][0]["signature"]["name"] == "replay_input_copy_none"


def test_a_log_read_offline_is_not_advised_a_flag_its_own_server_ran_with(tmp_path):
    """sglang #1467's launch line, run without CUDA graphs, then sglang #4584's fault: no 'retry with
    --disable-cuda-graph' for a server that already ran that way, in the command's output and in the report."""
    launch = ("python -m sglang.launch_server --model-path /mnt/data/models/DeepSeek-V2.5 --tp 8 --mem-fraction-static "
              "0.8 --enable-mla --trust-remote-code --port 30000 --disable-cuda-graph")
    path = tmp_path / "server.log"
    path.write_text("\n".join([launch] + log("sglang_4584_rank_watchdog_illegal_memory_access.log")) + "\n")
    proc = gpudiag(path, tmp_path / "r")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    advice = next(ln for ln in proc.stdout.splitlines() if ln.startswith("  advice: "))
    assert "retry with --disable-cuda-graph" not in advice and "CUDA_LAUNCH_BLOCKING=1" in advice
    assert advice.endswith("(the log's server ran with --disable-cuda-graph).")
    [run] = (tmp_path / "r" / "runs").iterdir()
    report = subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", "report", run.name,
                             "--reports-dir", str(tmp_path / "r"), "--markdown"],
                            capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert "illegal_memory_access" in report.stdout and "retry with --disable-cuda-graph" not in report.stdout
    plain = classify("\n".join(log("sglang_4584_rank_watchdog_illegal_memory_access.log")))
    assert "retry with --disable-cuda-graph" in plain["crashes"][0]["signature"]["recommendation"]
