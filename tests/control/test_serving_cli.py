"""`gpudiag serving --log FILE [--json]` on real logs quoted in public sglang issues (tests/fixtures/serving),
run as a user runs it: the figures, their declared shape, the text view, and one-line errors."""
import json
import subprocess
import sys
from pathlib import Path

from probes.schemas import check
from probes.servingstats.shape import SERVING

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"


def gpudiag(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "gpudiag", "serving", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


def test_json_gives_the_buckets_of_a_dp_attention_log():
    proc = gpudiag("--log", str(FIXTURES / "sglang_6081_mtp_dp_attention.log"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert check(SERVING, out, "serving") is None
    assert out["decode_lines"] == 5 and out["median_accept_len"] == 2.86
    assert out["buckets"]["8-15"]["count"] == 5 and out["graph"] == {"true": 5, "false": 0, "absent": 0}
    assert out["ranks"] == ["DP0 TP0", "DP2 TP2", "DP5 TP5", "DP6 TP6", "DP7 TP7"]
    assert out["first_ts"] == "2025-05-31 18:31:21" and out["last_ts"] == "2025-05-31 18:31:25"
    assert out["source"].endswith("sglang_6081_mtp_dp_attention.log") and out["truncated"] is False


def test_bench_serving_output_is_read_too():
    text = (FIXTURES / "sglang_13376_bench_serving_accept_length.txt").read_text()
    proc = gpudiag("--log", "-", "--json", stdin=text)
    [block] = json.loads(proc.stdout)["bench"]
    assert (block["output_throughput"], block["concurrency"], block["accept_length"]) == (6148.7, 256, 5.86)
    plain = gpudiag("--log", "-", stdin=text).stdout
    assert "bench_serving: concurrency 256, output 6148.70 tok/s, accept length 5.86" in plain


def test_text_view_renders_the_table_from_the_figures():
    proc = gpudiag("--log", str(FIXTURES / "sglang_13023_trailing_comma_graph_off.log"))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "graph on 6, off 2, not logged 0 (decode lines)" in lines
    assert any(line.split() == ["16-31", "3", "3", "895.36", "-"] for line in lines)
    assert "no accept len: speculation off" in proc.stdout


def test_a_log_without_stats_lines_says_so(tmp_path):
    log = tmp_path / "quiet.log"
    log.write_text("[2026-01-01 00:00:00] The server is fired up and ready to roll!\n")
    proc = gpudiag("--log", str(log), "--json")
    assert proc.returncode == 4 and json.loads(proc.stdout)["decode_lines"] == 0   # nothing measured: not "ok"
    assert "no Decode batch, Prefill batch or Serving Benchmark Result lines" in gpudiag("--log", str(log)).stdout


def test_host_text_cannot_reach_the_terminal_raw(tmp_path):
    log = tmp_path / "odd.log"
    log.write_text("[2026-01-01 00:00:00 TP0\x1b]0;pwned\x07] Decode batch, #running-req: 1, gen throughput "
                   "(token/s): 5.00, #queue-req: 0\n")
    proc = gpudiag("--log", str(log))
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout


def test_unreadable_input_is_one_line(tmp_path):
    for path, why in ((tmp_path / "absent.log", "cannot read"), (tmp_path, "is a directory")):
        proc = gpudiag("--log", str(path))
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and why in proc.stderr and "Traceback" not in proc.stderr
    proc = gpudiag()
    assert proc.returncode == 2 and "--log" in proc.stderr


def test_text_view_says_few_sample_no_figure_restarts_and_eager_lines(tmp_path):
    body = lambda name: "\n".join(l for l in (FIXTURES / name).read_text().splitlines()  # noqa: E731
                                  if not l.startswith("#fixture")) + "\n"
    # sglang issue #11948's EAGLE3 window, relaunched with graphs captured up to 1, then PR #29853's one line.
    log = tmp_path / "server.log"
    log.write_text("[2025-10-22 10:27:00] server_args=ServerArgs(model_path='m', decode_log_interval=40)\n"
                   + body("sglang_11948_eagle3_first_line_after_empty_prefill.log")
                   + "[2026-07-01 15:00:00] server_args=ServerArgs(model_path='m', cuda_graph_max_bs=64)\n"
                   + body("sglang_29853_npu_prefill_one_decode.log"))
    proc = gpudiag("--log", str(log))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "the log spans 2 server runs (split at each launch's server_args line): figures of the last; " \
           "earlier runs: 5 decode lines, 2025-10-22 10:27:56 to 2025-10-22 10:27:58" in text
    assert "few-sample (the ranks' first lines)" in text
    assert "1 decode lines above the largest captured batch size 64 (cuda_graph_max_bs of the log's " \
           "server_args line): eager by sglang's rule" in text
    assert "idle judged from a line every 40 decode steps (sglang's default" in text
    out = json.loads(gpudiag("--log", str(log), "--json", "--decode-log-interval", "20").stdout)
    assert check(SERVING, out, "serving") is None
    assert out["cadence"] == {"decode_log_interval": 20, "from": "--decode-log-interval"}
    assert out["earlier_runs"][0]["buckets"]["1"]["median_gen_throughput"] == 172.225
    idle = tmp_path / "idle.log"
    idle.write_text(body("sglang_11948_eagle3_first_line_after_empty_prefill.log").splitlines()[0] + "\n"
                    + body("sglang_11948_eagle3_first_line_after_empty_prefill.log").splitlines()[1] + "\n")
    assert "no figure: 1 of 1 lines follow an idle stretch" in gpudiag("--log", str(idle)).stdout
