"""Charts that help: each workload its own series, CPU runs labelled CPU, no heat map when every cell was
skipped (the report says why), units on the axes and a one-line caption under each chart."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.probe_data import fitted_host
from gpudiag.render import plots

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
pytest.importorskip("matplotlib", reason="the optional extra gpudiag[plots] is not installed")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "250"})


def gpu_a():
    return json.loads((FLEET3 / "hosts" / "gpu-a.json").read_text())


def cpu_gpu():
    """copy_bench's device record when it ran without CUDA, as the probe writes it."""
    timing = {"status": "ok", "median_us": 2.0, "method": "perf_counter"}
    return {"device": "cpu", "index": None, "name": "cpu", "status": "ok",
            "sweep": [{"bytes": 1024, "copy_us": 1.8, "foreach_us": 1.9}],
            "workloads": [{"name": "eagle_draft/bs8/h7168", "path": "eagle_draft", "batch_size": 8, "status": "ok",
                           "strategies": {"loop": timing, "grouped_foreach": dict(timing, median_us=1.5),
                                          "packed": dict(timing, median_us=0.1)}}]}


def test_each_workload_is_its_own_series_over_usable_strategies():
    gpu = gpu_a()["probes"]["copy_bench"]["data"]["gpus"][0]
    series = plots.copy_series(gpu)
    names = sorted(w["name"] for w in gpu["workloads"])
    assert sorted(series) == names                                   # one series per workload, none joined
    for points in series.values():
        assert [s for s, _ in points] == [s for s in plots.DRAWN_STRATEGIES if s in dict(points)]
        assert "packed" not in dict(points)                          # sglang cannot use it: never drawn


def test_cpu_runs_are_labelled_cpu():
    assert plots.chart_device(cpu_gpu()) == "CPU"
    assert plots.chart_device({"index": 4, "name": "NVIDIA H200"}) == "GPU 4 (NVIDIA H200)"


def _run_with(tmp_path, copy_gpus, cells):
    run = tmp_path / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    doc = gpu_a()
    doc["name"] = "box"
    doc["probes"]["copy_bench"]["data"]["gpus"] = copy_gpus
    doc["probes"]["copy_bench"]["data"]["device"] = copy_gpus[0].get("device", "cuda")
    doc["probes"]["cuda_graph"]["data"]["cells"] = cells
    (run / "hosts" / "box.json").write_text(json.dumps(fitted_host(doc)))
    (run / "run.json").write_text(json.dumps({"schema": 1, "run_id": "r1", "kind": "scan", "started_at": "x",
                                              "hosts": [{"name": "box", "status": "ok"}]}))
    return run


def test_all_skipped_heat_map_is_not_drawn_and_the_report_says_why(tmp_path):
    skipped = [{"path": "eagle_draft", "batch_size": bs, "draft_tokens": 4, "status": "skipped",
                "detail": "no CUDA device visible to torch 2.13.0+cpu"} for bs in (1, 4)]
    run = _run_with(tmp_path, [cpu_gpu()], skipped)
    out = tmp_path / "report" / "FINDINGS.md"
    result = invoke("report", run, "--markdown", "-o", out)
    assert result.exit_code in (0, 1, 4), result.output
    assert sorted(p.name for p in out.parent.glob("*.png")) == ["copy-box.png"]
    text = (out.parent / "FINDINGS.appendix.md").read_text()
    assert "Heat map not drawn: every cell was skipped (no CUDA device visible to torch 2.13.0+cpu), so there " \
           "is no heat map." in text
    assert f"*{plots.COPY_CAPTION}*" in text


def test_fleet_charts_carry_one_line_captions(tmp_path):
    out = tmp_path / "FINDINGS.md"
    invoke("report", FLEET3, "--markdown", "-o", out)
    text = (tmp_path / "FINDINGS.appendix.md").read_text()
    for caption in (plots.COPY_CAPTION, plots.REPRO_CAPTION):
        line = f"*{caption}*"
        assert line in text and "\n" not in caption
    lines = text.splitlines()
    for image in (line for line in lines if line.startswith("![")):
        assert lines[lines.index(image) + 1].startswith("*")          # the caption right under its chart
