"""`gpudiag report` through the CLI: golden markdown for a recorded fleet, JSON, console, exit codes, bad input.

Regenerate the golden file after an intended change: GPUDIAG_UPDATE_GOLDEN=1 pytest tests/control/test_report_cli.py
"""
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.findings import all_findings
from gpudiag.probe_data import fitted_host
from gpudiag.render import plots
from gpudiag.render.markdown import render_markdown
from gpudiag.run_loader import load_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FLEET3 = FIXTURES / "runs" / "fleet3"
GOLDEN = FIXTURES / "golden" / "fleet3.md"
GOLDEN_APPENDIX = FIXTURES / "golden" / "fleet3.appendix.md"


def invoke(*args):
    return CliRunner().invoke(cli, ["report", *map(str, args)])


def test_markdown_matches_the_golden_file(tmp_path):
    out = tmp_path / "FINDINGS.md"
    result = invoke(FLEET3, "--markdown", "-o", out, "--no-charts")   # the same bytes with or without matplotlib
    assert result.exit_code == 3, result.output      # gpu-c was not reached (3 outranks the findings)
    text = out.read_text(encoding="utf-8")
    appendix = (tmp_path / "FINDINGS.appendix.md").read_text(encoding="utf-8")
    if os.environ.get("GPUDIAG_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text.replace("FINDINGS.appendix.md", "fleet3.appendix.md"), encoding="utf-8")
        GOLDEN_APPENDIX.write_text(appendix.replace("FINDINGS.md", "fleet3.md"), encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8").replace("fleet3.appendix.md", "FINDINGS.appendix.md")
    assert appendix == GOLDEN_APPENDIX.read_text(encoding="utf-8").replace("fleet3.md", "FINDINGS.md")


def test_the_report_fits_in_250_lines_and_links_its_appendix(tmp_path):
    out = tmp_path / "FINDINGS.md"
    result = invoke(FLEET3, "-o", out, "--no-charts")
    assert "appendix: " + str(tmp_path / "FINDINGS.appendix.md") in result.output
    report, appendix = out.read_text(), (tmp_path / "FINDINGS.appendix.md").read_text()
    assert len(report.splitlines()) <= 250
    assert "- Appendix: [`FINDINGS.appendix.md`](FINDINGS.appendix.md) — per host" in report
    assert "## Appendix: hosts" not in report and "#### Source facts (sglang)" not in report
    assert appendix.startswith("# gpudiag report appendix — run 20260110T120000Z-a1b2\n\nThe report: "
                               "[`FINDINGS.md`](FINDINGS.md).")
    for section in ("### gpu-a", "#### Copy timings", "#### CUDA-graph repro matrix", "#### Source facts (sglang)",
                    "### gpu-b", "### gpu-c"):
        assert section in appendix
    # the numbers behind each finding stay in the report itself
    assert "| eagle_draft_extend | 64 | 16 | mismatch |" in report
    assert "| 4, 5, 7 | eagle_draft/bs32/h7168 | 448 KiB | 3.6 µs | 5.4 µs | GPU stream |" in report   # equal GPUs once
    assert "| 6 | eagle_draft/bs32/h7168 | 448 KiB | 4.9 µs | 7.3 µs | GPU stream |" in report
    # methodology only for probes that ran; next steps point at their findings
    steps = report.split("## Next steps")[1]
    numbered = [line for line in steps.splitlines() if line[:1].isdigit()]
    actions = [line.split(". ", 1)[1].rsplit(" (finding", 1)[0] for line in numbered]
    assert len(actions) == len(set(actions)) and all(" (finding " in line for line in numbered)
    # both repro failures call for the same safe flag values: one step names both findings
    assert steps.count("keep --speculative-num-draft-tokens at 8 or less") == 1
    assert "(finding 1, 2 · 1 host: gpu-a)" in steps
    # the one saving, as Q5 states it for GPUs 4, 5 and 7 and finding 7 claims it
    assert "(finding 7 · 1 host: gpu-a · saves 37.5 µs per decode step)" in steps
    assert "GPUs 4,5,7: saves 37.5 µs per decode step" in report and "47.5" not in report


def test_an_odd_report_name_gives_a_link_that_still_points_at_its_appendix(tmp_path):
    out = tmp_path / "fleet (a) [b].md"
    assert invoke(FLEET3, "-o", out, "--no-charts").exit_code == 3
    assert (tmp_path / "fleet (a) [b].appendix.md").is_file()
    assert "[`fleet (a) [b].appendix.md`](fleet%20%28a%29%20%5Bb%5D.appendix.md)" in out.read_text()


def test_on_stdout_the_appendix_follows_the_report(tmp_path):
    result = invoke(FLEET3, "--markdown")
    text = result.output
    assert "- Appendix: at the end of this document" in text and "`-o FILE.md` writes it to FILE.appendix.md" in text
    assert text.index("## Next steps") < text.index("## Appendix: hosts") < text.index("#### Copy timings")
    assert invoke(FLEET3, "-o", "-").output == text
    assert list(tmp_path.iterdir()) == []


def test_markdown_has_every_section_and_cites_the_facts():
    run = load_run(FLEET3)
    text = render_markdown(run, all_findings(run))
    for heading in ("# gpudiag report — run 20260110T120000Z-a1b2 (2026-01-10)", "## Answers", "## Verdict",
                    "## Fleet", "## Findings", "## Appendix: hosts", "#### Copy timings",
                    "#### CUDA-graph repro matrix", "## Methodology", "## Next steps"):
        assert heading in text
    assert "| gpu-c | unreachable |" in text
    # --deep was asked and gpu-b has no copy_bench or cuda_graph result: incomplete
    assert "| gpu-b | incomplete | 8× NVIDIA H100 80GB HBM3 | 575.57.08 | 2.9.1+cu129 | 0.5.23 | DFLASH | off |" in text
    assert "`sglang/srt/speculative/eagle_draft_cuda_graph_runner.py:421`: `buffers.hidden_states[:raw_bs]" in text
    assert "| eagle_draft | 16 | ok | ok | ok | capture_failed |" in text             # repro matrix row
    assert "![" not in text                                                          # no charts asked for


def test_markdown_to_stdout_is_deterministic():
    first, second = invoke(FLEET3, "--markdown"), invoke(FLEET3, "--markdown")
    assert first.exit_code == 3 and first.output == second.output
    assert first.output.startswith("# gpudiag report")


def test_json_emits_summary_and_findings():
    result = invoke(FLEET3, "--json")
    assert result.exit_code == 3
    doc = json.loads(result.output)
    assert doc["schema"] == 1 and doc["run"]["run_id"] == "20260110T120000Z-a1b2"
    assert doc["summary"]["hosts"] == {"total": 3, "by_status": {"ok": 2, "unreachable": 1}}
    counts = doc["summary"]["findings"]["by_severity"]
    assert counts["critical"] == 1 and sum(counts.values()) == len(doc["findings"])
    assert doc["summary"]["has_errors"] is True
    assert [h["name"] for h in doc["hosts"]] == ["gpu-a", "gpu-b", "gpu-c"]
    assert {"id", "severity", "title", "hosts", "evidence", "recommendation", "sources"} <= set(doc["findings"][0])


def test_console_summary_lists_findings_in_a_table():
    result = invoke(FLEET3)
    assert result.exit_code == 3
    assert "gpu-c" in result.output and "hosts.unscanned" in result.output
    assert "critical" in result.output


def write_run(root, hosts):
    run = root / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema": 1, "run_id": "r1", "kind": "scan",
                                              "started_at": "2026-02-02T00:00:00Z",
                                              "hosts": [{"name": h["name"], "status": h["status"]} for h in hosts]}))
    for h in hosts:
        (run / "hosts" / f"{h['name']}.json").write_text(json.dumps(fitted_host(h)))
    (root / "latest").write_text("r1\n")
    return run


def test_latest_run_with_missing_probes_renders_and_exits_0(tmp_path):
    partial = {"schema": 1, "name": "lone", "status": "ok", "probes": {
        "env": {"status": "ok", "data": {"hostname": "lone", "python": {"version": "3.10.12"}}},
        "torch_caps": {"status": "skipped", "reason": "torch is not installed"},
        "copy_bench": {"status": "timeout", "reason": "ran past 60 s"}}}
    write_run(tmp_path, [partial])
    result = invoke("--reports-dir", tmp_path, "--markdown")
    assert result.exit_code == 0, result.output
    assert "| lone | ok | - |" in result.output and "3.10.12" in result.output
    assert "torch_caps skipped (0.0 s: torch is not installed)" in result.output
    methodology = result.output.split("## Methodology")[1].split("\n## ")[0]
    assert "- Environment:" in methodology                  # env ran
    for absent in ("torch capabilities", "Copy timings", "CUDA-graph repro", "Source facts"):
        assert absent not in methodology                    # skipped, timed out or not selected: no method


def test_newer_schema_is_a_one_line_error_exit_2(tmp_path):
    run = write_run(tmp_path, [{"schema": 1, "name": "a", "status": "ok", "probes": {}}])
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(manifest, schema=99)))
    result = invoke(run, "--json")
    assert result.exit_code == 2
    assert "schema 99 is newer" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_newer_schema_host_file_is_unreadable_and_the_report_exits_3(tmp_path):
    run = write_run(tmp_path, [{"schema": 1, "name": "a", "status": "ok", "probes": {}}])
    (run / "hosts" / "a.json").write_text(json.dumps({"schema": 99, "name": "a", "status": "ok"}))
    result = invoke(run, "--json")
    assert result.exit_code == 3
    assert "schema 99 is newer" in result.output and "Traceback" not in result.output
def test_missing_run_and_conflicting_formats_exit_2(tmp_path):
    assert invoke("--reports-dir", tmp_path).exit_code == 2
    assert "no runs yet" in invoke("--reports-dir", tmp_path).output
    assert invoke(tmp_path / "nowhere").exit_code == 2
    assert invoke(FLEET3, "--json", "--markdown").exit_code == 2


def test_without_matplotlib_markdown_has_tables_and_no_chart_files(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "charts_available", lambda: False)
    run_dir = tmp_path / "fleet3"
    shutil.copytree(FLEET3, run_dir)
    out = tmp_path / "out" / "FINDINGS.md"
    result = invoke(run_dir, "--markdown", "-o", out)
    assert result.exit_code == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["FINDINGS.appendix.md", "FINDINGS.md"]
    assert "![" not in out.read_text() + (out.parent / "FINDINGS.appendix.md").read_text()
    assert "matplotlib not installed" in result.output


def test_charts_written_beside_the_markdown_are_linked(tmp_path, monkeypatch):
    calls = []

    def fake_write_charts(run, out_dir):
        calls.append((run.manifest.run_id, out_dir))
        return {"copy:gpu-a": "copy-gpu-a.png", "repro:gpu-a": "repro-gpu-a.png"}
    monkeypatch.setattr(plots, "write_charts", fake_write_charts)
    out = tmp_path / "FINDINGS.md"
    invoke(FLEET3, "--markdown", "-o", out)
    assert calls == [("20260110T120000Z-a1b2", tmp_path)]
    text = (tmp_path / "FINDINGS.appendix.md").read_text()      # the charts sit with the per-host timings
    assert "![copy time vs size, gpu-a](copy-gpu-a.png)" in text and "![repro matrix, gpu-a](repro-gpu-a.png)" in text


@pytest.mark.skipif(plots.charts_available(), reason="checks the path where matplotlib is absent")
def test_write_charts_draws_nothing_without_matplotlib(tmp_path):
    assert plots.write_charts(load_run(FLEET3), tmp_path) == {}
    assert list(tmp_path.iterdir()) == []


def test_charts_are_drawn_and_linked_when_matplotlib_is_installed(tmp_path):
    pytest.importorskip("matplotlib", reason="the optional extra gpudiag[plots] is not installed")
    out = tmp_path / "FINDINGS.md"
    invoke(FLEET3, "--markdown", "-o", out)
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["copy-gpu-a.png", "repro-gpu-a.png"]
    assert all((tmp_path / p).read_bytes().startswith(b"\x89PNG") for p in pngs)
    assert "![copy time vs size, gpu-a](copy-gpu-a.png)" in (tmp_path / "FINDINGS.appendix.md").read_text()
    again = tmp_path / "again"
    again.mkdir()
    invoke(FLEET3, "--markdown", "-o", again / "FINDINGS.md")
    assert (again / "copy-gpu-a.png").read_bytes() == (tmp_path / "copy-gpu-a.png").read_bytes()   # deterministic


def test_a_classified_log_run_reports_its_signature_and_exits_1(tmp_path):
    run = tmp_path / "runs" / "log1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema": 1, "run_id": "log1", "kind": "repro", "started_at": "2026-03-03T00:00:00Z", "hosts": [],
        "repro": {"problem": "cuda-graph-crash", "log": "server.log", "outcome": "failures", "matches": [
            {"name": "capture_end_no_active_capture", "severity": "error", "meaning": "capture ended early",
             "recommendation": "Drop --enable-piecewise-cuda-graph.", "reference": "sglang #35437",
             "lines": [{"line": 18, "text": "num_active_captures_ > 0 INTERNAL ASSERT FAILED"}]}]}}))
    result = invoke(run, "--markdown")
    assert result.exit_code == 1
    assert "# server.log:18" in result.output and "Drop --enable-piecewise-cuda-graph." in result.output


def test_json_to_a_file_is_deterministic_and_an_interrupted_host_is_reported(tmp_path):
    run = write_run(tmp_path, [{"schema": 1, "name": "done", "status": "ok", "probes": {}}])
    manifest = json.loads((run / "run.json").read_text())
    manifest["hosts"].append({"name": "late", "status": "interrupted", "reason": "stopped before it finished"})
    (run / "run.json").write_text(json.dumps(manifest))
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert invoke(run, "--json", "-o", first).exit_code == 4     # a host never finished: incomplete
    invoke(run, "--json", "-o", second)
    assert first.read_bytes() == second.read_bytes()
    [finding] = json.loads(first.read_text())["findings"]
    assert (finding["id"], finding["hosts"]) == ("hosts.partial", ["late"])
    assert "stopped before it finished" in finding["evidence"][0]["text"]


def test_appendix_shows_what_the_probes_gathered_as_tables():
    text = invoke(FLEET3, "--markdown").output
    assert "| cuda:0, cuda:1, cuda:2, cuda:3 | skipped | - | - | - | - | - | - | serving sglang (pid 4087, port 30000): " \
           "never touched, not even with --force |" in text           # torch_caps, the server's GPUs, one row
    assert "| cuda:4, cuda:5, cuda:6, cuda:7 | ok | 4 of 4 |" in text
    assert "| cpu | ok | 8 of 8 |" in text
    assert "(seq_lens, out_cache_loc, positions, topk_p, topk_index, req_pool_indices, mrope_positions, rids_int, " \
           "bootstrap_room_ids_int) → sglang.srt.model_executor.runner_utils.buffers" in text   # resolved definition
    assert "| hidden_states separate |" in text and "| batched |" in text
    assert "Graph-runner classes (29): BaseBreakableCudaGraphRunner, BaseCudaGraphRunner," in text     # 0.5.23
    assert "Graph-runner classes (16): BreakableCudaGraphRunner, CPUGraphRunner, CudaGraphRunner," in text  # 0.5.11
    assert "Breakable-graph helpers (6): BreakableCUDAGraph, BreakableCUDAGraphCapture," in text
    assert "`--cuda-graph-max-bs-decode`" in text
    assert "| --disable-cuda-graph | --cuda-graph-backend-{decode,prefill}=disabled |" in text
    assert "Server pid 4087 (/opt/sglang/.venv/bin/python), CUDA_VISIBLE_DEVICES=0,1,2,3:" in text
    deployment = text[text.index("Server pid 4087"):text.index("#### Copy timings")]
    assert "--speculative-num-steps 3" in deployment and "--enable-dp-attention" not in deployment
    assert "Read from `/srv/sglang-dev/.venv/bin/python` (chosen: live_server)" in text
    assert "43 files checked (only the files the facts above cite; hash every file with `gpudiag scan " \
           "--verify-all`, or `--set sglang_source.verify_all=true`)" in text


# torch read by the probing Python, sglang read from the live server's venv.
SPLIT_INTERPRETERS_HOST = {"schema": 1, "name": "split", "status": "ok", "probes": {
    "env": {"status": "ok", "data": {"python": {"executable": "/usr/bin/python3"},
                                     "torch": {"available": True, "version": "2.1.0"}}},
    "sglang_source": {"status": "ok", "data": {"found": True, "version": "0.5.14", "interpreter": {
        "path": "/opt/venv/bin/python", "why": "live_server"}}}}}


def test_fleet_table_names_the_interpreters_and_flags_torch_read_elsewhere(tmp_path):
    write_run(tmp_path, [SPLIT_INTERPRETERS_HOST])
    text = invoke("--reports-dir", tmp_path, "--markdown").output
    assert "| split | ok | - | - | 2.1.0 (another Python than sglang's) | 0.5.14 |" in text
    assert "| split | /opt/venv/bin/python (live_server) | /usr/bin/python3 (ran the probes) |" in text
    assert "sglang.torch_other_interpreter" in text


def test_json_hosts_carry_interpreters_and_decode_graph_settings():
    doc = json.loads(invoke(FLEET3, "--json").output)
    gpu_a, gpu_b = doc["hosts"][0], doc["hosts"][1]
    assert gpu_a["sglang_interpreter"] == "/opt/sglang/.venv/bin/python (live_server)"
    assert gpu_a["torch_interpreter"] == "/opt/sglang/.venv/bin/python (live_server)"   # the probes ran under it
    assert gpu_a["torch_elsewhere"] is False and gpu_a["graph_max_bs"] == "64"
    assert gpu_b["cuda_graphs"] == "off" and gpu_b["deployment_flags"]["model_path"] == "Qwen/Qwen3-8B"
    assert "cuda_graph_backend_decode" not in gpu_b["deployment_flags"]     # no server here uses that spelling
    assert "cuda_graph.dflash_draft_graph_disabled" not in {f["id"] for f in doc["findings"]}   # graphs are off


def test_console_marks_torch_read_in_another_python(tmp_path):
    write_run(tmp_path, [SPLIT_INTERPRETERS_HOST])
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, ["report", "--reports-dir", str(tmp_path)])
    assert "another Python" in result.output and "sglang.torch_other_interpreter" in result.output
