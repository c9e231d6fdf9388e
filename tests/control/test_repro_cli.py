"""`gpudiag repro cuda-graph-crash` through the real command line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"


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
    assert "nothing ran: no CUDA device" in proc.stdout      # results on stdout, progress on stderr
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


def test_log_names_the_signature_and_line_and_exits_1(tmp_path):
    log = LOGS / "dflash_capture_end_assert.log"
    proc = gpudiag("repro", "cuda-graph-crash", "--log", str(log), "--reports-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("capture_end_no_active_capture [error]:")
    assert f"{log}:18: RuntimeError: captures_underway.empty() INTERNAL ASSERT FAILED" in proc.stdout
    assert "sglang #35437" in proc.stdout
    run_dir = tmp_path / "runs" / (tmp_path / "latest").read_text().strip()
    stored = json.loads((run_dir / "run.json").read_text())["repro"]
    assert stored["matches"][0]["lines"][0]["line"] == 18 and stored["outcome"] == "failures"


def test_log_without_a_crash_exits_0_and_json_lists_info_matches(tmp_path):
    proc = gpudiag("repro", "cuda-graph-crash", "--log", str(LOGS / "dflash_draft_graph_disabled.log"), "--json",
                   "--reports-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [m["name"] for m in doc["matches"]] == ["dflash_draft_graph_disabled"] and doc["outcome"] == "ok"
    clean = gpudiag("repro", "cuda-graph-crash", "--log", str(LOGS / "clean_eagle_server.log"),
                    "--reports-dir", str(tmp_path))
    assert clean.returncode == 0 and "no known CUDA-graph crash signature matched" in clean.stdout


@pytest.mark.parametrize("args, message", [
    (["--batch-sizes", "1,x"], "--batch-sizes '1,x': expected comma-separated integers"),
    (["--draft-tokens", "9-2"], "--draft-tokens '9-2': need 1 <= LOW <= HIGH"),
    (["--algorithm", "MEDUSA"], "--algorithm: unknown MEDUSA"),
    (["--log", "/nonexistent/server.log"], "--log /nonexistent/server.log: cannot read"),
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
