"""The README's first code block: its first line (the main job), run as written in a copy of the project with a
fresh HOME and no active venv, must make its own venv (PEP 668 systems refuse pip into the system Python),
install gpudiag into it, scan this machine and write the findings report; its second line is the test command
CI runs."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def first_block():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert match and readme.index(match.group(0)) < readme.index("## "), "the first block comes first"
    return match.group(1)


def test_first_block_names_a_venv_and_quotes_brackets():
    block = first_block()
    assert re.search(r"python3 -m venv \S+ && \. \S+/bin/activate", block)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # zsh globs an unquoted [..]: every command-line value with brackets is quoted.
    for line in re.findall(r"^gpudiag .*$", readme, re.M):
        command = line.split("#", 1)[0]
        for word in re.findall(r"(?:^|\s)([^\s'\"]*\[[^\s]*)", command):
            assert word.startswith(("'", '"')) or "<" in word, line


def test_first_block_runs_in_a_fresh_venv(tmp_path):
    copy = tmp_path / "project"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "reports", "__pycache__",
                                                                "*.egg-info", "build", "FINDINGS.md"))
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(HOME=str(tmp_path / "home"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")))
    # The interpreter running the tests is the `python3` the block finds first.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    main_job, test_command = first_block().splitlines()[:2]
    assert test_command.split("#")[0].strip() == "scripts/test.sh"
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()   # CI runs the README's test command
    proc = subprocess.run(["bash", "-c", main_job], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=900)
    if not (copy / ".venv" / "bin" / "gpudiag").exists() and re.search(
            r"Failed to establish|Temporary failure in name resolution|No matching distribution", proc.stderr):
        pytest.skip("no package index reachable: " + proc.stderr.strip().splitlines()[-1])
    assert (copy / ".venv" / "bin" / "gpudiag").exists(), proc.stdout[-2000:] + proc.stderr[-3000:]
    run_id = (copy / "reports" / "latest").read_text().strip()
    assert (copy / "reports" / "runs" / run_id / "hosts" / "localhost.json").is_file()
    assert (copy / "FINDINGS.md").read_text(encoding="utf-8").startswith("# gpudiag report")
    where = subprocess.run([str(copy / ".venv" / "bin" / "python"), "-c", "import gpudiag; print(gpudiag.__file__)"],
                           capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert where.stdout.strip() == str(copy / "gpudiag" / "__init__.py")
