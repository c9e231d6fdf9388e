"""Charts draw categories as categories: the replay chart's strategies are points side by side per workload,
never joined by a line; the repro heat map names every colour in a legend, cells no child ran included; and a
report drawn from the recorded fleet carries both charts."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.render import plots

pytest.importorskip("matplotlib", reason="the optional extra gpudiag[plots] is not installed")
FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"


def gpu_a_data(probe):
    return json.loads((FLEET3 / "hosts" / "gpu-a.json").read_text())["probes"][probe]["data"]


def test_strategies_are_points_not_lines():
    import matplotlib.pyplot as plt

    gpu = gpu_a_data("copy_bench")["gpus"][0]
    fig = plots.copy_figure(gpu, "gpu-a")
    sweep_ax, eager_ax, graph_ax = fig.axes[:3]
    assert {line.get_linestyle() for line in sweep_ax.get_lines()} <= {"-", "--"}  # sizes: a numeric axis
    for ax, clock in ((eager_ax, "cpu_us"), (graph_ax, "gpu_us")):
        series = plots.copy_series(gpu, clock)
        lines = ax.get_lines()
        assert len(lines) == len(series)
        assert {line.get_linestyle() for line in lines} <= {"None"}      # never a line across strategies
        if len(lines) > 1:
            first_xs = sorted(line.get_xdata()[0] for line in lines)
            assert len(set(first_xs)) == len(first_xs)                  # side by side, not stacked
        drawn = {s for points in series.values() for s, _ in points}
        missing = [s for s in plots.DRAWN_STRATEGIES if s not in drawn]
        assert [t.get_text() for t in ax.texts] == ["not run"] * len(missing)
    assert len(eager_ax.get_lines()) > 1
    plt.close(fig)


def test_heat_map_legend_names_every_colour_and_the_cells_not_run():
    import matplotlib.pyplot as plt

    cells = [{"path": "eagle_draft", "batch_size": 8, "draft_tokens": 4, "status": "ok"},
             {"path": "eagle_draft", "batch_size": 64, "draft_tokens": 4, "status": "failed"},
             {"path": "eagle_draft_extend", "batch_size": 8, "draft_tokens": 4, "status": "skipped"}]
    fig = plots.repro_figure(cells, "box")
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ["ok", "skipped", "failed", "not run"]      # extend at batch size 64 never ran
    plt.close(fig)
    fig = plots.repro_figure(cells[:2], "box")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["ok", "skipped", "failed"]
    plt.close(fig)
    assert "grey not run" in plots.REPRO_CAPTION


def test_the_fleet_report_draws_both_charts(tmp_path):
    out = tmp_path / "FINDINGS.md"
    result = CliRunner().invoke(cli, ["report", str(FLEET3), "--markdown", "-o", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code in (1, 3), result.output
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["copy-gpu-a.png", "repro-gpu-a.png"]
    assert f"*{plots.REPRO_CAPTION}*" in (tmp_path / "FINDINGS.appendix.md").read_text()
