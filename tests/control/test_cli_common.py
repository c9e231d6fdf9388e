"""Shared CLI plumbing: probe settings and one-line usage errors."""
import json

import pytest
from click.testing import CliRunner

from gpudiag.cli import UserError, cli
from gpudiag.cli.common import parse_settings


@pytest.fixture
def scan_requests(monkeypatch):
    """Run `gpudiag scan` without scanning: each call records the ScanRequest the CLI built."""
    from gpudiag.cli import runs as runs_module   # where commands build their Orchestrator
    from gpudiag.orchestrator import ScanOutcome
    seen = []

    class Recorder:
        def __init__(self, request, *args, **kwargs):
            seen.append(request)

        def run(self, hosts):
            return ScanOutcome(results=[])

    monkeypatch.setattr(runs_module, "Orchestrator", Recorder)

    def scan(*args):
        CliRunner().invoke(cli, ["scan", "localhost", *args])
        return seen[-1]
    return scan


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


def test_gpu_probes_get_their_own_limits_and_a_longer_host_deadline(scan_requests, tmp_path):
    request = scan_requests("--deep", "--reports-dir", str(tmp_path))
    # the host's runner hands the GPU probes their declared limits as they run: the control side sends none
    assert request.probe_timeouts == {}
    assert request.timeout == 300.0 + 900.0 + 1200.0
    request = scan_requests("--reports-dir", str(tmp_path), "--timeout", "50")
    assert request.probe_timeouts == {} and request.timeout == 50.0


def test_localhost_scan_and_report_need_neither_paramiko_nor_torch(tmp_path):
    # A GPU box's own Python often lacks paramiko; the control side must never need torch.
    import subprocess
    import sys
    code = ("import sys; sys.modules['paramiko'] = None; sys.modules['torch'] = None\n"
            "from gpudiag.cli import main\n"
            "sys.argv = ['gpudiag'] + sys.argv[1:]\n"
            "main()\n")
    env = {"PATH": "/usr/bin:/bin", "GPUDIAG_SSH_CONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    scan = subprocess.run([sys.executable, "-c", code, "scan", "localhost", "--probes", "env",
                           "--set", "env.torch=false", "--reports-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert scan.returncode == 0, scan.stderr
    report = subprocess.run([sys.executable, "-c", code, "report", "--reports-dir", str(tmp_path / "r"),
                             "--markdown"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "localhost" in report.stdout


def test_a_graph_scan_sends_no_signature_table_the_probe_classifies_itself(scan_requests, tmp_path):
    request = scan_requests("--probes", "cuda_graph", "--reports-dir", str(tmp_path))
    assert "signatures" not in (request.options.get("cuda_graph") or {})


def test_scan_exits_1_when_the_stored_run_has_error_findings(monkeypatch, tmp_path):
    import gpudiag.findings as findings
    from gpudiag.models import Finding
    base = ["scan", "localhost", "--probes", "env", "--set", "env.torch=false", "--reports-dir", str(tmp_path)]
    assert CliRunner().invoke(cli, base).exit_code == 0
    error = Finding("hosts.test", "error", "an error finding", ("localhost",), (), "fix it")
    monkeypatch.setattr(findings, "all_findings", lambda run: [error])
    result = CliRunner().invoke(cli, base)
    assert result.exit_code == 1
    assert "1 error" in result.output


def test_verify_all_asks_the_source_probe_to_hash_every_file(scan_requests, tmp_path):
    request = scan_requests("--verify-all", "--reports-dir", str(tmp_path))
    assert request.options["sglang_source"] == {"verify_all": True}


def test_hosts_table_prints_inventory_text_that_looks_like_rich_markup(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "[/etc] none"))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("hosts:\n  gpu-1:\n    address: 10.0.0.1\n    python: '/opt/[/etc] x[bold]/python'\n")
    result = CliRunner().invoke(cli, ["hosts", "all", "-i", str(inventory)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "/opt/[/etc] x[bold]/python" in result.output and "[/etc] none (absent)" in result.output


def run_main(monkeypatch, capsys, *argv):
    import sys
    from gpudiag.cli import main
    monkeypatch.setattr(sys, "argv", ["gpudiag", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr()


def fail_resolving(monkeypatch, exc):
    from gpudiag.cli import hosts as hosts_module

    def raise_it(*args, **kwargs):
        raise exc
    monkeypatch.setattr(hosts_module, "load_hosts", raise_it)


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_exception_is_an_internal_error_exit_70_not_findings(monkeypatch, capsys, debug):
    from gpudiag.cli import ExitCode
    if debug:
        monkeypatch.setenv("GPUDIAG_DEBUG", "1")
    else:
        monkeypatch.delenv("GPUDIAG_DEBUG", raising=False)
    fail_resolving(monkeypatch, RuntimeError("boom\nsecond line"))
    code, out = run_main(monkeypatch, capsys, "hosts", "localhost")
    assert code == ExitCode.INTERNAL == 70
    assert "gpudiag: internal error: RuntimeError: boom (rerun with GPUDIAG_DEBUG=1 for the traceback)" \
        in out.err
    assert ("Traceback" in out.err) is debug


@pytest.mark.parametrize("exc, code", [(KeyboardInterrupt(), 130), (EOFError("stray"), 70)])
def test_ctrl_c_exits_130_and_a_stray_eoferror_is_internal(monkeypatch, capsys, exc, code):
    monkeypatch.delenv("GPUDIAG_DEBUG", raising=False)
    fail_resolving(monkeypatch, exc)
    assert run_main(monkeypatch, capsys, "hosts", "localhost")[0] == code


def test_main_keeps_usage_errors_at_2_and_help_at_0(monkeypatch, capsys):
    code, out = run_main(monkeypatch, capsys, "scan", "localhost", "--probes", "bogus", "--reports-dir", "/tmp/x")
    assert code == 2 and "unknown probe bogus" in out.err
    assert run_main(monkeypatch, capsys, "--help")[0] == 0
    assert run_main(monkeypatch, capsys, "hosts", "--bogus-option")[0] == 2


SSH_CONFIG_WITH_IGNORED = """\
Host gpu-a
  HostName 127.0.0.1
  Port 1
  ProxyCommand ssh -W %h:%p bastion
Host gpu-b
  HostName 127.0.0.1
  Port abc
Host gpu-c
  HostName 127.0.0.1
  Port 1
"""


def ignored_settings_config(tmp_path, monkeypatch):
    path = tmp_path / "ssh_config"
    path.write_text(SSH_CONFIG_WITH_IGNORED)
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(path))
    monkeypatch.chdir(tmp_path)
    return path


def warnings_in(text):
    return [line for line in text.splitlines() if line.startswith("gpudiag: warning:")]


def test_hosts_warns_once_per_host_about_ssh_settings_it_cannot_honour(tmp_path, monkeypatch):
    path = ignored_settings_config(tmp_path, monkeypatch)
    result = CliRunner().invoke(cli, ["hosts", "gpu-a", "gpu-b", "gpu-c", "--json"])
    assert result.exit_code == 0, result.output
    assert warnings_in(result.stderr) == [
        f"gpudiag: warning: gpu-a: {path}: ProxyCommand is not supported (ignored; use ProxyJump)",
        f"gpudiag: warning: gpu-b: {path}: Port 'abc' is not a number (ignored; port 22 is used)"]
    assert [h["name"] for h in json.loads(result.stdout)] == ["gpu-a", "gpu-b", "gpu-c"]


def test_scan_warns_about_an_ignored_proxycommand_before_scanning(tmp_path, monkeypatch):
    path = ignored_settings_config(tmp_path, monkeypatch)
    result = CliRunner().invoke(cli, ["scan", "gpu-a", "--probes", "env", "--timeout", "5",
                                      "--reports-dir", str(tmp_path / "reports")])
    assert result.exit_code == 3, result.output          # port 1 refuses: the warning did not stop the scan
    assert warnings_in(result.stderr) == [
        f"gpudiag: warning: gpu-a: {path}: ProxyCommand is not supported (ignored; use ProxyJump)"]


def test_long_probes_get_their_declared_time_limits(scan_requests, tmp_path):
    from probes import catalog
    request = scan_requests("--probes", "copy_bench,env", "--reports-dir", str(tmp_path))
    assert request.probe_timeouts == {}      # copy_bench's PROBE["timeout_s"] is read by the host's runner
    declared = {"slow_probe": {"set": "deep", "timeout_s": 45}, "quick": {"set": "light"}}
    assert catalog.timeouts(declared) == {"slow_probe": 45.0}
    assert catalog.PROBE_TIMEOUTS == {"copy_bench": 900.0, "cuda_graph": 1200.0}   # the built-in probes' own
    assert scan_requests("--probes", "copy_bench", "--probe-timeout", "60", "--reports-dir",
                         str(tmp_path)).probe_timeouts == {}       # --probe-timeout overrides them all
