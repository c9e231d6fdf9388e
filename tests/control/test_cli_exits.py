"""Errors and exits through the CLI: one-line usage errors, absurd numbers refused, help on every option,
whole command descriptions, one exit mapping, and a closed pipe that ends quietly with 141."""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gpudiag.cli import LAZY_COMMANDS, ExitCode, cli

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "tests" / "fixtures" / "runs" / "fleet3"


def gpudiag(*args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, env=env,
                          timeout=60, **kwargs)


@pytest.mark.parametrize("args, words", [
    (["scan", "--bogus"], "No such option '--bogus'"),
    (["nope"], "No such command 'nope'"),
    (["scan", "localhost", "--timeout", "1e309"], "'--timeout': 1e309 is not between 1 and 604800 seconds"),
    (["scan", "localhost", "--timeout", "nan"], "'--timeout': nan is not between"),
    (["scan", "localhost", "--timeout", "-5"], "'--timeout': -5 is not between"),
    (["scan", "localhost", "--probe-timeout", "inf"], "'--probe-timeout': inf is not between"),
    (["scan", "localhost", "--connect-timeout", "1e400"], "'--connect-timeout'"),
    (["scan", "localhost", "--forks", "1e309"], "'--forks'"),
    (["repro", "cuda-graph-crash", "localhost", "--cell-timeout", "1e309"], "'--cell-timeout'"),
    (["report", "--severity"], "Option '--severity' requires an argument"),
    (["diff", "only-one"], "Missing argument 'RUN_B'"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path, args, words):
    proc = gpudiag(*args, "--reports-dir", str(tmp_path / "r")) if args[0] in ("scan",) else gpudiag(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpudiag: error: "), proc.stderr
    assert words in proc.stderr and "--help)" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args, words", [
    (["repro", "cuda-graph-crash", "localhost", "--batch-sizes", "1,99999999999999999999"],
     "batch sizes must be positive integers up to 4096"),
    (["scan", "localhost", "--set", "copy_bench.samples=1e400", "--probes", "copy_bench"],
     "--set copy_bench.samples: expected an integer ≥ 1"),
])
def test_absurd_values_checked_by_gpudiag_are_one_line_usage_errors(tmp_path, args, words):
    proc = gpudiag(*args, "--reports-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()


def all_commands():
    ctx = click.Context(cli)
    pending = [(name, cli.get_command(ctx, name)) for name in LAZY_COMMANDS]
    while pending:
        name, command = pending.pop()
        yield name, command
        if isinstance(command, click.Group):
            pending += [(f"{name} {sub}", command.get_command(ctx, sub)) for sub in command.list_commands(ctx)]


def test_every_option_has_help_text():
    missing = [f"{name} {'/'.join(param.opts)}" for name, command in all_commands() for param in command.params
               if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()]
    assert missing == []


def test_top_level_help_keeps_whole_descriptions():
    proc = gpudiag("--help")
    assert proc.returncode == 0
    commands = " ".join(proc.stdout.split("Commands:", 1)[1].split())
    assert "..." not in commands
    ctx = click.Context(cli)
    for name in LAZY_COMMANDS:
        first_sentence = " ".join(cli.get_command(ctx, name).get_short_help_str(limit=1000).split())
        assert first_sentence in commands, name


def test_no_command_exits_in_the_middle_of_its_logic():
    """Commands return an ExitCode; only gpudiag/cli/__init__.py turns results into exit statuses."""
    offenders = []
    for path in sorted((ROOT / "gpudiag").rglob("*.py")):
        if path == ROOT / "gpudiag" / "cli" / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exit" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("sys", "ctx", "os"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    # The zipapp's own entry point is a separate program (the bundle), not a command of this CLI.
    assert [o for o in offenders if not o.startswith("gpudiag/engines/zipapp.py")] == []


@pytest.mark.parametrize("args", [["report", "fleet3", "--markdown"],   # click.echo
                                  ["report", "fleet3"],                 # a rich table
                                  ["probes"]])
def test_a_closed_pipe_ends_quietly_with_141(tmp_path, args):
    reports = tmp_path / "reports"
    shutil.copytree(FLEET, reports / "runs" / "fleet3")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # `gpudiag report | head -0`: the reader is gone before the first write.
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", *args, "--reports-dir", str(reports)]
                            if args[0] == "report" else [sys.executable, "-m", "gpudiag", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == ExitCode.PIPE_CLOSED == 141
    assert stderr == b""


def test_internal_errors_are_one_line_and_exit_70(tmp_path):
    reports = tmp_path / "reports"
    (reports / "runs" / "odd" / "hosts").mkdir(parents=True)
    shutil.copy(FLEET / "run.json", reports / "runs" / "odd" / "run.json")
    proc = gpudiag("report", "odd", "--reports-dir", str(reports))
    assert proc.returncode in (0, 1, 2, 3)     # a readable run never ends as a gpudiag bug
    assert "internal error" not in proc.stderr
