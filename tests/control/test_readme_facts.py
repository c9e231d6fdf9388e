"""The README's promises, read from its own tables and checked against the code and a real scan."""
import os
import re
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def table_after(marker):
    """The rows of the first markdown table after `marker`, as lists of cell texts (header dropped)."""
    lines = README.split(marker, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
        rows.append([c.strip() for c in cells])
    return rows


def test_a_scan_leaves_exactly_the_files_the_readme_lists(tmp_path):
    """A real light scan of this machine: the control side writes only the listed files, and the probes
    write nothing to the host's temp directory or working directory."""
    listed = [row[0].strip("`") for row in table_after("A scan leaves exactly these files")]
    assert listed == ["reports/latest", "reports/runs/<run-id>/run.json", "reports/runs/<run-id>/hosts/<host>.json",
                      "reports/runs/<run-id>/hosts/.derived/<host>.pickle"]
    workdir, host_tmp, empty_proc, state = tmp_path / "work", tmp_path / "host-tmp", tmp_path / "proc", tmp_path / "st"
    for folder in (workdir, host_tmp, empty_proc):
        folder.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(host_tmp), GPUDIAG_REPORTS="reports",
               GPUDIAG_STATE=str(state))
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--set",
                           f"deployment.proc_root={empty_proc}"], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    run_id = (workdir / "reports" / "latest").read_text().strip()
    expected = {p.replace("<run-id>", run_id).replace("<host>", "localhost") for p in listed}
    written = {str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.is_file()}
    assert written == expected
    assert [p.name for p in state.iterdir()] == ["derived.key"]  # the one file outside the reports, as said
    assert list(host_tmp.iterdir()) == []


def test_the_documented_probe_options_command_and_completion_exist():
    assert "gpudiag probes" in README and "docs/probe-options.md" in README
    completion = re.search(r"_GPUDIAG_COMPLETE=(\w+) gpudiag", README)
    assert completion and completion.group(1) == "bash_source"
    env = dict(os.environ, PYTHONPATH=str(ROOT), _GPUDIAG_COMPLETE="bash_source")
    # click's completion needs the console-script name; run the entry point under it.
    script = "import sys; sys.argv[0] = 'gpudiag'; from gpudiag.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert "_gpudiag_completion" in proc.stdout, proc.stderr
