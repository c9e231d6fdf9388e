"""Every console path that prints host-provided strings (runs, diff, report, the scan summary and progress, the
repro table) goes through the console sanitiser: escape sequences, controls and bidi overrides never reach the
terminal, and the text around them stays readable."""
import io
import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from gpudiag.cli import cli
from gpudiag.cli.repro import _print_host as print_repro_host
from gpudiag.models import HostResult, ProbeResult
from gpudiag.render.console import ScanProgress, summary_table
from gpudiag.repro.summary import HostRepro

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\u202egnp.exe\x9b31m\x07\x00"
BAD = ("\x1b", "\x07", "\x9b", "\u202e", "\x00")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "250"})


def assert_clean(text):
    for bad in BAD:
        assert bad not in text, repr(bad)
    assert "gnp.exe" in text                          # the text stays, only the controls go


def hostile_copy(root, run_id="r2"):
    """fleet3 with escape sequences in run.json and in gpu-a's host data (versions, flags, timings, status)."""
    run = root / run_id
    shutil.copytree(FLEET3, run)
    manifest = json.loads((run / "run.json").read_text())
    manifest.update(run_id=run_id + ESCAPES, kind="scan" + ESCAPES, started_at="2026-03-01T00:00:00Z" + ESCAPES)
    manifest["hosts"][0]["status"] = "ok" + ESCAPES
    (run / "run.json").write_text(json.dumps(manifest))
    doc = json.loads((run / "hosts" / "gpu-a.json").read_text())
    doc["probes"]["sglang_source"]["data"]["version"] = "0.5.11" + ESCAPES
    doc["probes"]["env"]["data"]["driver"] = ESCAPES
    server = doc["probes"]["deployment"]["data"]["servers"][0]
    server["cmdline"] += ["--served-model-name", ESCAPES]
    server["args"]["served_model_name"] = ESCAPES
    doc["probes"]["sglang_source"]["data"]["integrity"]["modified"] = ["sglang/x" + ESCAPES + ".py"]
    doc["probes"]["copy_bench"]["data"]["gpus"][0]["workloads"][0]["strategies"]["loop"]["median_us"] *= 3
    (run / "hosts" / "gpu-a.json").write_text(json.dumps(doc))
    rename_workload(run)
    return run


def rename_workload(run):
    """A workload name with escapes (in both runs, so that its timings are compared)."""
    doc = json.loads((run / "hosts" / "gpu-a.json").read_text())
    doc["probes"]["copy_bench"]["data"]["gpus"][0]["workloads"][0]["name"] += ESCAPES
    (run / "hosts" / "gpu-a.json").write_text(json.dumps(doc))


def test_runs_lists_a_hostile_run_json_without_its_escapes(tmp_path):
    hostile_copy(tmp_path / "runs")
    result = invoke("runs", "--reports-dir", tmp_path)
    assert result.exit_code == 0, result.output
    assert "r2" in result.output and "scan" in result.output
    assert_clean(result.output)


def test_diff_prints_changed_host_strings_through_the_sanitiser(tmp_path):
    plain = tmp_path / "r1"
    shutil.copytree(FLEET3, plain)
    rename_workload(plain)
    hostile = hostile_copy(tmp_path)
    result = invoke("diff", plain, hostile)
    assert result.exit_code == 0, result.output
    assert "sglang: 0.5.11 → 0.5.11" in result.output                    # the change is still shown
    assert "server flag" in result.output and "copy timing GPU" in result.output
    assert_clean(result.output)
    both_ways = invoke("diff", hostile, plain, "--all")
    assert_clean(both_ways.output)


def test_report_console_and_markdown_of_a_hostile_run(tmp_path):
    hostile = hostile_copy(tmp_path)
    for args in ((), ("--markdown",), ("-o", tmp_path / "out" / "FINDINGS.md")):
        result = invoke("report", hostile, *args)
        assert result.exit_code == 3, result.output
        for bad in BAD:
            assert bad not in result.output
    files = "".join(p.read_text() for p in (tmp_path / "out").glob("*.md"))
    assert "FINDINGS.appendix.md" in files and "gnp.exe" in files
    for bad in BAD:
        assert bad not in files


def test_scan_progress_and_summary_table_clean_host_strings():
    result = HostResult(name="gpu" + ESCAPES, status="unreachable", reason="timed out" + ESCAPES,
                        probes={"env" + ESCAPES: ProbeResult(status="error" + ESCAPES)})
    out = io.StringIO()
    console = Console(file=out, width=250, force_terminal=False)
    with ScanProgress(1, console=console) as progress:
        progress.host_done(result)
    console.print(summary_table([result], "scan"))
    assert "timed out" in out.getvalue()
    assert_clean(out.getvalue())


def test_repro_table_cleans_every_host_string():
    data = {"gpu": {"name": "H200" + ESCAPES, "compute_capability": "sm_90"},
            "environment": {"driver": ESCAPES, "torch": "2.8", "sglang": "0.5.11"}, "mode": "synthetic",
            "cells": [{"path": "eagle_draft", "batch_size": 64, "draft_tokens": 16, "status": "mismatch",
                       "detail": "differs" + ESCAPES}],
            "boundaries": [{"text": "bs >= 64" + ESCAPES}],
            "signatures": [{"name": "sig" + ESCAPES, "meaning": "m", "reference": "r", "recommendation": ESCAPES}],
            "interpreter": {"path": "/venv/bin/python" + ESCAPES, "why": "live_server"},
            "notes": ["note" + ESCAPES]}
    out = io.StringIO()
    console = Console(file=out, width=250, force_terminal=True)   # a terminal: where escapes would act
    print_repro_host(console, HostRepro("gpu" + ESCAPES, True, "", data))
    print_repro_host(console, HostRepro("down" + ESCAPES, False, "unreachable" + ESCAPES))
    text = out.getvalue()
    assert "boundary: bs >= 64" in text and "/venv/bin/python" in text and "could not run the repro" in text
    # rich adds its own styling escapes on a terminal; none of the host's sequences survive
    for bad in ("\x1b]0;owned", "\x1b[2J", "\x1b]8;;http://evil", "\x9b", "\u202e", "\x00", "\x07"):
        assert bad not in text


def test_repro_log_quotes_a_hostile_log_without_its_controls(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("booting\nRuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED " + ESCAPES + "\n",
                   encoding="utf-8")
    result = invoke("repro", "cuda-graph-crash", "--log", log, "--reports-dir", tmp_path / "reports")
    assert result.exit_code == 1, result.output
    assert "INTERNAL ASSERT FAILED" in result.output
    assert_clean(result.output)
