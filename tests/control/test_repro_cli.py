"""`gpudiag repro cuda-graph-crash` through the real command line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
CORPUS = LOGS / "corpus"


def gpudiag(*args, timeout=300):
    return subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))


def cuda_present():
    import torch
    return torch.cuda.is_available()


@pytest.mark.skipif(cuda_present(), reason="checks the no-CUDA path (exit 4); this host has CUDA")
def test_localhost_without_cuda_exits_4_and_stores_skipped_cells(tmp_path):
    proc = gpudiag("repro", "cuda-graph-crash", "localhost", "--reports-dir", str(tmp_path),
                   "--batch-sizes", "1,4", "--draft-tokens", "2-8", "--max-mem-mib", "2048")
    assert proc.returncode == 4, proc.stderr
    assert "nothing ran: no CUDA device" in proc.stdout
    # One row per replay path: its algorithm, the batch sizes and draft tokens it covers, the count and reason.
    rows = [line for line in proc.stdout.splitlines() if "skipped ×2" in line]
    assert len(rows) == 3, proc.stdout
    assert [row.split("│")[1].strip() for row in rows] == ["DFLASH", "EAGLE", "EAGLE"]
    assert all(row.split("│")[3].strip() == "1,4" and row.split("│")[4].strip() == "8" for row in rows)
    assert all("no CUDA" in row for row in rows)
    run_dir = tmp_path / "runs" / (tmp_path / "latest").read_text().strip()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["kind"] == "repro" and run["repro"]["outcome"] == "nothing_ran"
    assert run["repro"]["plan"]["batch_sizes"] == [1, 4] and run["repro"]["plan"]["max_mem_mib"] == 2048
    host = json.loads((run_dir / "hosts" / "localhost.json").read_text())
    probe = host["probes"]["cuda_graph"]
    assert probe["status"] == "ok" and probe["data"]["memory_cap_mib"] == 2048
    cells = probe["data"]["cells"]
    assert len(cells) == 3 * 2   # eagle_draft, eagle_draft_extend, dflash_verify at bs 1 and 4
    assert all(c["status"] == "skipped" and c["detail"].startswith("no CUDA device") for c in cells)
    assert set(host["probes"]) >= {"env", "cuda_graph"}


def test_log_with_a_known_signature_quotes_lines_gives_release_advice_and_exits_1(tmp_path):
    log = CORPUS / "sglang_35437_dflash_breakable_capture_end.log"
    (tmp_path / "latest").write_text("20260101T000000Z-abcd\n")     # the last host run stays the default
    proc = gpudiag("repro", "cuda-graph-crash", "--log", str(log), "--reports-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith(f"{log}: known signature: 1 crash in 17 lines; advice assumes sglang 0.5.14+")
    assert out[1].startswith("crash 1: capture_end_no_active_capture at line 15: RuntimeError: num_active_captures_")
    assert f"  {log}:7: --speculative-algorithm DFLASH \\" in out
    assert "  advice: Run DFlash without prefill CUDA graphs (--disable-prefill-cuda-graph) until the release " \
           "carries the fix; decode graphs can stay on." in out
    assert "  reference: sglang #35437" in out
    assert (tmp_path / "latest").read_text() == "20260101T000000Z-abcd\n"
    run_dir, = (tmp_path / "runs").iterdir()
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["kind"] == "log" and stored["hosts"] == []
    assert stored["log"]["outcome"] == "known_signature" and stored["log"]["crashes"][0]["line"] == 15

    report = gpudiag("report", run_dir.name, "--reports-dir", str(tmp_path), "--markdown")
    assert report.returncode == 1, report.stderr
    assert "capture_end_no_active_capture (capture_failure)" in report.stdout
    assert "17: RuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED" in report.stdout
    assert "advice assumes sglang 0.5.14+" in report.stdout


def test_log_with_an_unclassified_crash_exits_1_and_says_where(tmp_path):
    log = CORPUS / "sglang_2468_warmup_failed_after_startup.log"
    proc = gpudiag("repro", "cuda-graph-crash", "--log", str(log), "--reports-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert "crash 1: unclassified crash at line 15 (unclassified): AssertionError: res=<Response [502]>" \
        in proc.stdout
    assert "  family: unclassified, after the server was ready" in proc.stdout
    assert "  last frames: sglang/srt/server.py:621 in _wait_and_warmup" in proc.stdout
    assert not (tmp_path / "latest").exists()


def test_log_that_is_not_a_graph_problem_says_so(tmp_path):
    log = CORPUS / "sglang_37215_tcpstore_eaddrinuse.log"
    proc = gpudiag("repro", "cuda-graph-crash", "--log", str(log), "--json", "--reports-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["outcome"] == "unclassified_crash"
    assert (doc["crashes"][0]["family"], doc["crashes"][0]["detail"]) == ("not_a_graph_problem", "port_in_use")
    assert doc["crashes"][0]["signature"] is None and doc["run_id"]


def test_clean_log_from_stdin_exits_0_and_reports_the_dflash_decision(tmp_path):
    text = (LOGS / "dflash_draft_graph_disabled.log").read_bytes().replace(b"\n", b"\r\n")
    proc = subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", "repro",
                           "cuda-graph-crash", "--log", "-", "--reports-dir", str(tmp_path)],
                          input=text, capture_output=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert out[0] == "stdin: clean: no crash in 5 lines; the server came up at line 4"
    assert "DFlash draft graph disabled at startup: [2026-03-10 07:21:40 TP0] Disable DFLASH draft cuda graph " \
           "because the draft attention backend does not support TARGET_VERIFY capture. (line 2)" in out
    run_dir, = (tmp_path / "runs").iterdir()
    report = gpudiag("report", run_dir.name, "--reports-dir", str(tmp_path), "--json")
    assert report.returncode == 0, report.stderr
    assert "no crash" in report.stdout


@pytest.mark.parametrize("args, message", [
    (["--batch-sizes", "1,x"], "--batch-sizes '1,x': expected comma-separated integers"),
    (["--draft-tokens", "9-2"], "--draft-tokens '9-2': need 1 <= LOW <= HIGH"),
    (["--algorithm", "MEDUSA"], "--algorithm: unknown MEDUSA"),
    (["--log", "/nonexistent/server.log"], "--log /nonexistent/server.log: cannot read: No such file"),
    (["--log", "/"], "--log /: is a directory"),
    (["--log", "server.log", "gpu-1"], "--log classifies a file on this machine; give it without TARGETS"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    from click.testing import CliRunner
    from gpudiag.cli import cli
    result = CliRunner().invoke(cli, ["repro", "cuda-graph-crash", *args, "--reports-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().startswith(f"gpudiag: error: {message}")
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "latest").exists()   # nothing stored for bad input


def test_a_reports_dir_that_cannot_hold_a_run_is_a_usage_error(tmp_path):
    from click.testing import CliRunner
    from gpudiag.cli import cli
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for args in (["localhost"], ["--log", str(blocker)]):
        result = CliRunner().invoke(cli, ["repro", "cuda-graph-crash", *args, "--reports-dir", str(blocker / "sub")])
        assert result.exit_code == 2, result.output
        assert "--reports-dir" in result.output and "Traceback" not in result.output
