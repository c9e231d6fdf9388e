"""Small edges through the CLI: options that name nothing are refused with one line; ingest of empty
input says so."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))
    monkeypatch.chdir(tmp_path)


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("command", [["scan", "localhost"], ["hosts", "localhost"], ["repro", "cuda-graph-crash", "localhost"]])
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_python_is_refused(command, value):
    line = one_error_line(run(*command, "--python", value))
    assert line.startswith("gpudiag: error: --python is empty"), line


@pytest.mark.parametrize("value", [",,", "", " , "])
def test_probes_naming_nothing_is_refused(value):
    line = one_error_line(run("scan", "localhost", "--probes", value))
    assert line == (f"gpudiag: error: --probes {value!r} names nothing: give comma-separated names, "
                    f"or leave the option out")
    assert not Path("reports").exists()  # refused before anything ran


@pytest.mark.parametrize("source", ["/dev/null", "empty.txt", "-"])
def test_ingest_of_empty_input_says_so(tmp_path, source):
    (tmp_path / "empty.txt").write_text("\n")
    result = CliRunner().invoke(cli, ["ingest", source], input="", catch_exceptions=False)
    line = one_error_line(result)
    assert "empty input" in line and "nothing to ingest" in line and "no such file" not in line, line
