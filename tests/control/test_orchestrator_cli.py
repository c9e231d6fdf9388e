"""`gpudiag scan` on the local transport through click's runner: exit codes, plain progress lines off a
terminal, --json, NO_COLOR, and the Ctrl-C handler put back afterwards."""
import json
import re
import signal
import sys

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

FAST = ["--probes", "env", "--set", "env.torch=false"]
ANSI_COLOR = re.compile(r"\x1b\[[0-9;]*3[0-9](;[0-9]+)*m|\x1b\[9[0-7]m")


@pytest.fixture
def run_scan(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # no stray inventory.yaml is picked up

    def run(*args, env=None):
        return CliRunner().invoke(cli, ["scan", "localhost", "--python", sys.executable, "--reports-dir",
                                        str(tmp_path / "reports"), *FAST, *args], env=env or {})
    return run


def test_ok_scan_exits_0_with_a_plain_line_and_a_table(run_scan, tmp_path):
    result = run_scan()
    assert result.exit_code == 0, result.output
    assert re.search(r"^\[1/1\] localhost: ok \(\d+\.\d s\)$", result.output, re.M)
    assert "gpudiag scan" in result.output and "env:ok" in result.output
    run_dirs = list((tmp_path / "reports" / "runs").iterdir())
    assert len(run_dirs) == 1 and (run_dirs[0] / "hosts" / "localhost.json").is_file()


def test_missing_interpreter_exits_3(run_scan):
    result = run_scan("--python", "/nonexistent/python3")
    assert result.exit_code == 3
    assert "localhost: python_missing" in result.output


def test_json_summary_is_the_manifest(run_scan):
    result = run_scan("--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)                 # progress went to stderr; stdout is JSON only
    assert doc["kind"] == "scan" and doc["interrupted"] is False
    assert [(h["name"], h["status"]) for h in doc["hosts"]] == [("localhost", "ok")]


def test_no_color_even_when_forced_to_a_terminal(run_scan):
    colored = run_scan(env={"FORCE_COLOR": "1", "COLUMNS": "120"})
    assert ANSI_COLOR.search(colored.output)          # the check can fail: colors are there without NO_COLOR
    plain = run_scan(env={"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "120"})
    assert plain.exit_code == 0
    assert not ANSI_COLOR.search(plain.output)


def test_scan_puts_the_sigint_handler_back(run_scan):
    before = signal.getsignal(signal.SIGINT)
    assert run_scan().exit_code == 0
    assert signal.getsignal(signal.SIGINT) is before


def test_unknown_probe_is_a_usage_error(run_scan):
    result = run_scan("--probes", "nope")
    assert result.exit_code == 2 and "unknown probe nope" in result.output


def test_host_text_that_looks_like_rich_markup_is_printed_as_is(run_scan):
    result = run_scan("--python", "/nonexistent/[/etc] x[bold]")
    assert result.exit_code == 3, result.output
    assert "[/etc] x[bold]" in result.output                     # in the progress line and the table
    assert result.output.count("[/etc] x") >= 2


def test_reports_dir_under_a_file_is_a_one_line_usage_error(tmp_path):
    (tmp_path / "afile").write_text("")
    frame = 'GPUDIAG-BEGIN n\n{"schema": 1, "host": "h", "probes": {}}\nGPUDIAG-END n\n'
    for command in (["scan", "localhost", "--python", sys.executable, *FAST],
                    ["ingest", "-"]):
        result = CliRunner().invoke(cli, [*command, "--reports-dir", str(tmp_path / "afile" / "reports")],
                                    input=frame)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"gpudiag: error: --reports-dir: {tmp_path / 'afile'}")
        assert lines[0].endswith("cannot create the run: Not a directory")


def test_a_host_file_that_cannot_be_written_is_a_warning_and_the_scan_goes_on(run_scan, monkeypatch):
    import errno
    from gpudiag import store
    real = store.write_text_atomic

    def disk_full_for_hosts(path, text):
        if path.parent.name == "hosts":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, text)
    monkeypatch.setattr(store, "write_text_atomic", disk_full_for_hosts)
    result = run_scan("--json")
    assert result.exit_code == 3, result.output    # the scan went on, but its record is not whole
    warnings = [line for line in result.stderr.splitlines() if line.startswith("gpudiag: warning:")]
    assert len(warnings) == 1
    assert "localhost.json: cannot write localhost's result: No space left on device" in warnings[0]
    assert [(h["name"], h["status"]) for h in json.loads(result.stdout)["hosts"]] == [("localhost", "ok")]


def test_run_json_that_cannot_be_written_at_the_end_still_prints_the_summary(run_scan, monkeypatch):
    import errno
    from gpudiag import store
    real = store.write_json_atomic
    calls = []

    def fails_after_start(path, doc):
        calls.append(path)
        if len(calls) > 1:       # EIO, not ENOSPC: a full disk still gets run.json rewritten in place
            raise OSError(errno.EIO, "Input/output error")
        real(path, doc)
    monkeypatch.setattr(store, "write_json_atomic", fails_after_start)
    result = run_scan()
    assert [path.name for path in calls] == ["run.json", "run.json"]
    assert "Traceback" not in result.output and result.exit_code == 3, result.output
    assert "gpudiag: warning:" in result.output and "run.json: cannot write: Input/output error" in result.output
    assert "env:ok" in result.output                      # the summary table still lists the host
