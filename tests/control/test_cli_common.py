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


def test_gpu_probes_get_their_own_limits_and_a_longer_host_deadline(monkeypatch, tmp_path):
    from gpudiag.cli import scan as scan_module
    seen = {}

    class Recorder:
        def __init__(self, request, *args, **kwargs):
            seen["request"] = request

        def run(self, hosts):
            from gpudiag.orchestrator import ScanOutcome
            return ScanOutcome(results=[])

    monkeypatch.setattr(scan_module, "Orchestrator", Recorder)
    CliRunner().invoke(cli, ["scan", "localhost", "--deep", "--reports-dir", str(tmp_path)])
    request = seen["request"]
    assert request.probe_timeouts == {"copy_bench": 900.0, "cuda_graph": 1200.0}
    assert request.timeout == 300.0 + 900.0 + 1200.0
    CliRunner().invoke(cli, ["scan", "localhost", "--reports-dir", str(tmp_path), "--timeout", "50"])
    assert seen["request"].probe_timeouts == {} and seen["request"].timeout == 50.0
