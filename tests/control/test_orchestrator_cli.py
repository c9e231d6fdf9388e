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
