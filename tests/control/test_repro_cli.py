"""`gpudiag repro cuda-graph-crash` through the real command line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"
CORPUS = LOGS / "corpus"


def gpudiag(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-c", "from gpudiag.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                          env=dict(os.environ, **(env or {})))


def cuda_present():
    import torch
    return torch.cuda.is_available()


@pytest.mark.skipif(cuda_present(), reason="checks the no-CUDA path (exit 4); this host has CUDA")
def test_localhost_without_cuda_exits_4_and_stores_skipped_cells(tmp_path):
    # An empty /proc view: a server running on this machine would otherwise choose the interpreter.
    (tmp_path / "empty-proc").mkdir()
    proc = gpudiag("repro", "cuda-graph-crash", "localhost", "--reports-dir", str(tmp_path),
                   "--batch-sizes", "1,4", "--draft-tokens", "2-8", "--max-mem-mib", "2048",
                   env={"GPUDIAG_PROC_ROOT": str(tmp_path / "empty-proc")})
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


RELEASES = ("0.5.11", "0.5.14", "0.5.23")


def wheel_python(tmp_path, version):
    """A venv without pip whose sys.path sees the unpacked wheel (a .pth line), as a serving venv would."""
    from tests.sglang_wheels import require
    site = require(version)
    venv = tmp_path / f"venv-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "sglang.pth").write_text(str(site) + "\n")
    return python, site


def captured(ids, layers):
    """llama.py's rule, restated: id i is captured before layer i + 1, reached only when i + 1 < layers."""
    return {i + 1 for i in ids if 0 <= i + 1 < layers}


@pytest.fixture
def no_live_servers(tmp_path, monkeypatch):
    """An empty /proc for the deployment probe: the plan must not pick up other processes on this machine."""
    (tmp_path / "empty-proc").mkdir()
    monkeypatch.setenv("GPUDIAG_PROC_ROOT", str(tmp_path / "empty-proc"))


@pytest.mark.parametrize("version", RELEASES)
def test_plan_json_on_the_real_wheels_has_valid_flags_and_capturable_layers(tmp_path, version, no_live_servers):
    from probes.sglang_facts.flags import find_server_flags
    from probes.sglang_facts.sources import SourceTree
    python, site = wheel_python(tmp_path, version)
    proc = gpudiag("repro", "cuda-graph-crash", "localhost", "--plan", "--json", "--python", python,
                   "--reports-dir", str(tmp_path / "reports"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert not (tmp_path / "reports" / "runs").exists()   # a plan stores no run
    assert plan["sglang"] == version and set(plan["budget"]) >= {"probe_s", "reserve_s", "launch", "what_fits"}
    flags = {f["name"] for f in find_server_flags(SourceTree(str(site)))["server_flags"]}
    algorithms = {launch["algorithm"] for launch in plan["launches"]}
    assert algorithms == {"EAGLE", "EAGLE3", "DFLASH"}
    for launch in plan["launches"]:
        assert set(launch) >= {"algorithm", "argv", "env", "target_config", "draft_config", "cells", "gpus"}
        assert launch["argv"][:3] == [python, "-m", "sglang.launch_server"] and not launch["refused"]
        used = [word for word in launch["argv"] if word.startswith("--")]
        assert [flag for flag in used if flag not in flags] == [], (version, launch["algorithm"])
        layers = launch["target_config"]["num_hidden_layers"]
        draft = launch["draft_config"]
        if launch["algorithm"] == "EAGLE3":
            ids = draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
            assert len(captured(ids, layers)) == len(ids) == 3   # all three: the hidden_states copy runs
        if launch["algorithm"] == "DFLASH":
            ids = draft["dflash_config"]["target_layer_ids"]
            assert ids and len(captured(ids, layers)) == len(ids) and layers - 1 not in ids
            assert draft["num_hidden_layers"] == layers == draft["dflash_config"]["num_target_layers"]
        assert launch["cells"] == [[b, launch["draft_tokens"]] for b in (1, 4, 16, 64)]
        assert launch["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_plan_reads_a_hub_id_from_the_hf_cache_and_one_draft_token_value_is_one_launch(tmp_path, monkeypatch,
                                                                                      no_live_servers):
    from tests.probes.test_cuda_graph_live_shapes import fake_hub_cache
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
              "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "num_hidden_layers": 28,
              "intermediate_size": 18944}
    snapshot = fake_hub_cache(tmp_path / "hf" / "hub", "Qwen/Qwen2.5-7B-Instruct", config)
    python, _ = wheel_python(tmp_path, "0.5.23")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    proc = gpudiag("repro", "cuda-graph-crash", "localhost", "--plan", "--json", "--python", python,
                   "--model", "Qwen/Qwen2.5-7B-Instruct", "--draft-tokens", "8", "--algorithm", "DFLASH",
                   "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    launch, = plan["launches"]   # one value: one launch, no bisection
    assert launch["draft_tokens"] == 8 and launch["when"] == "always"
    assert launch["config_sources"]["target"] == str(snapshot / "config.json")
    assert launch["target_config"]["hidden_size"] == 3584 and launch["target_config"]["num_hidden_layers"] == 2
    assert plan["budget"]["probe_s"] <= 300 and plan["budget"]["launches_at_most"] == 1
    text = gpudiag("repro", "cuda-graph-crash", "localhost", "--plan", "--python", python, "--algorithm", "EAGLE",
                   "--draft-tokens", "4", "--timeout", "300")
    assert text.returncode == 0, text.stderr
    assert "launch 1: EAGLE at 4 draft tokens (always)" in text.stdout and "launch 2" not in text.stdout
    assert "note: model: no live server; the bundled Llama-3-8B-shaped config is used" in text.stdout


def fake_live_server(proc_root, python, hf_home):
    """/proc/PID as the deployment probe reads it, for an EAGLE3 server on hub ids, TP 8, graphs up to bs 128."""
    argv = [python, "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "8",
            "--cuda-graph-max-bs", "128", "--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "6",
            "--speculative-draft-model-path", "lightseekorg/kimi-k2.6-eagle3", "--port", "30000"]
    pid = proc_root / "4242"
    pid.mkdir(parents=True)
    (pid / "cmdline").write_bytes(b"\0".join(word.encode() for word in argv) + b"\0")
    (pid / "environ").write_bytes(b"HF_HOME=" + str(hf_home).encode() + b"\0PATH=/usr/bin\0")


def test_plan_takes_the_live_servers_model_draft_tp_sizes_and_draft_tokens(tmp_path, monkeypatch):
    from tests.probes.test_cuda_graph_live_shapes import fake_hub_cache
    target = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 7168,
              "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 163840, "num_hidden_layers": 61,
              "intermediate_size": 18432}
    snapshot = fake_hub_cache(tmp_path / "hf" / "hub", "moonshotai/Kimi-K2.6", target)
    draft = fake_hub_cache(tmp_path / "hf" / "hub", "lightseekorg/kimi-k2.6-eagle3",
                           {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
                            "hidden_size": target["hidden_size"], "vocab_size": target["vocab_size"],
                            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}})
    python, _ = wheel_python(tmp_path, "0.5.23")
    fake_live_server(tmp_path / "proc", python, tmp_path / "hf")
    monkeypatch.setenv("GPUDIAG_PROC_ROOT", str(tmp_path / "proc"))
    proc = gpudiag("repro", "cuda-graph-crash", "localhost", "--plan", "--json", "--algorithm", "EAGLE3",
                   "--timeout", "300")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["interpreter"]["path"] == python
    first = plan["launches"][0]
    assert first["config_sources"] == {"target": str(snapshot / "config.json"), "draft": str(draft / "config.json")}
    assert first["draft_tokens"] == 6 and [c[0] for c in first["cells"]] == [1, 4, 16, 64, 128]
    assert first["argv"][first["argv"].index("--tp-size") + 1] == "8"
    assert first["layers"] == 4 and first["target_config"]["hidden_size"] == target["hidden_size"]
    assert first["draft_config"]["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
