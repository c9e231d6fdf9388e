"""Shared CLI plumbing: probe settings and one-line usage errors."""
import pytest
from click.testing import CliRunner

from gpudiag.cli import UserError, cli
from gpudiag.cli.common import parse_settings


def test_settings_parse_json_values_and_group_by_probe():
    options = parse_settings(("copy_bench.batch_sizes=[1,8]", "copy_bench.hidden=4096", "cuda_graph.mode=synthetic"))
    assert options == {"copy_bench": {"batch_sizes": [1, 8], "hidden": 4096}, "cuda_graph": {"mode": "synthetic"}}


@pytest.mark.parametrize("bad", ["novalue", "nodot=1", ".key=1", "probe.=1"])
def test_bad_setting_is_a_one_line_usage_error(bad):
    with pytest.raises(UserError, match="expected PROBE.KEY=VALUE"):
        parse_settings((bad,))


def test_scan_with_unknown_probe_exits_2_without_traceback(tmp_path):
    result = CliRunner().invoke(cli, ["scan", "localhost", "--probes", "env,bogus", "--reports-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown probe bogus" in result.output
    assert "Traceback" not in result.output
