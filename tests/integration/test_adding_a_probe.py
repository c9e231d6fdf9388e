"""docs/adding-a-probe.md made true: a probe added to a copy of the tree, through the real CLI, appears in the
report with its data and its finding; adding it takes three files written by hand besides its tests, and the two
generated docs regenerate from its declarations (scripts/generated-docs.py, as tests/control/test_generated_docs.py
does under GPUDIAG_UPDATE_DOCS=1)."""

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILES = 3

PROBE_MODULE = '''"""hello_probe: says hello with the runner's process id (a probe written for this test)."""
import os

from probes.optionspec import Option
from probes.schemas import i, obj, s

PROBE = {"set": "light", "needs": ("deployment",), "summary": "a greeting and the runner's pid",
         "gpu": "no", "torch": "no", "sglang": "no", "cost": "light: instant"}
OPTIONS = (Option("loud", "bool", False, "Shout the greeting."),)
SHAPE = obj({"greeting": s("what the probe says"), "pid": i("the runner's process id")}, "a greeting")
NOTES = "`greeting, pid`: the runner says hello."


def collect(ctx):
    greeting = "hello | <b>from</b> the overlay"
    return {"greeting": greeting.upper() if ctx.option("loud") else greeting, "pid": os.getpid()}
'''

RULE_MODULE = '''"""A finding on hello_probe's data (a rule written for this test)."""

from __future__ import annotations

from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import probe


def hello_seen(hosts: list[HostResult]) -> list[Finding]:
    found = []
    for host in hosts:
        data = probe(host, "hello_probe")
        if data:
            found.append(Finding(id="hello.seen", severity="warning", title="the hello probe answered",
                                 hosts=(host.name,), evidence=(Evidence(kind="text", text=str(data["pid"])),),
                                 recommendation="Say hello back.", sources=(f"{host.name}/probes/hello_probe",)))
    return found
'''


def _copy_tree(dest):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("gpudiag", "probes", "scripts", "docs"):
        shutil.copytree(ROOT / part, dest / part, ignore=ignore)


def _add_probe(tree):
    (tree / "probes" / "hello_probe.py").write_text(PROBE_MODULE)
    (tree / "gpudiag" / "findings" / "hello.py").write_text(RULE_MODULE)
    init = tree / "gpudiag" / "findings" / "__init__.py"
    text = init.read_text()
    assert "RULES: tuple[Rule, ...] = (\n" in text
    first_import = text.index("from gpudiag.findings import ")
    text = text[:first_import] + "from gpudiag.findings import hello\n" + text[first_import:]
    text = text.replace("RULES: tuple[Rule, ...] = (\n", "RULES: tuple[Rule, ...] = (\n    hello.hello_seen,\n", 1)
    init.write_text(text)


def _changed_files(before, after):
    """Paths added, removed or changed between two trees."""
    changed = []

    def walk(cmp, prefix):
        changed.extend(prefix + n for n in cmp.left_only + cmp.right_only + cmp.diff_files)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(before, after, ignore=["__pycache__"]), "")
    return sorted(changed)


def _gpudiag(tree, work, *args):
    proc = subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, timeout=300,
                          cwd=str(work), env=dict(os.environ, PYTHONPATH=str(tree)))
    return proc


def test_a_new_probe_takes_three_files_and_reaches_the_report(tmp_path):
    before, tree, work = tmp_path / "before", tmp_path / "tree", tmp_path / "work"
    _copy_tree(before)
    _copy_tree(tree)
    work.mkdir()
    _add_probe(tree)
    changed = _changed_files(before, tree)
    assert changed == ["gpudiag/findings/__init__.py", "gpudiag/findings/hello.py", "probes/hello_probe.py"]
    assert len(changed) <= MAX_FILES
    docs = subprocess.run([sys.executable, str(tree / "scripts" / "generated-docs.py"), "--check"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(tree)))
    assert docs.returncode == 1 and "docs/probe-options.md" in docs.stderr and "docs/probe-data.md" in docs.stderr
    subprocess.run([sys.executable, str(tree / "scripts" / "generated-docs.py")], check=True, timeout=120,
                   env=dict(os.environ, PYTHONPATH=str(tree)))
    regenerated = [p for p in _changed_files(before, tree) if p not in changed]
    assert regenerated == ["docs/probe-data.md", "docs/probe-options.md"]
    assert "\n## hello_probe\n" in (tree / "docs" / "probe-data.md").read_text()
    assert "| `loud` |" in (tree / "docs" / "probe-options.md").read_text()

    probes = _gpudiag(tree, work, "probes")
    assert probes.returncode == 0, probes.stderr[-2000:]
    assert "hello_probe" in probes.stdout
    one = _gpudiag(tree, work, "probes", "hello_probe")
    assert one.returncode == 0 and "loud" in one.stdout and "Shout the greeting." in one.stdout, one
    refused = _gpudiag(tree, work, "scan", "localhost", "--probes", "hello_probe", "--set", "hello_probe.shout=1")
    assert refused.returncode != 0 and "unknown option" in refused.stderr and "loud" in refused.stderr

    reports = work / "reports"
    scan = _gpudiag(tree, work, "scan", "localhost", "--probes", "hello_probe", "--reports-dir", str(reports), "--json",
                    "--set", "hello_probe.loud=false")
    assert scan.returncode in (0, 1), scan.stderr[-2000:]
    run_id = json.loads(scan.stdout)["run_id"]
    [host_file] = (reports / "runs" / run_id / "hosts").glob("*.json")
    result = json.loads(host_file.read_text())["probes"]["hello_probe"]
    assert result["status"] == "ok", result
    assert result["data"]["greeting"] == "hello | <b>from</b> the overlay"

    report = _gpudiag(tree, work, "report", "--markdown", "--reports-dir", str(reports))
    assert report.returncode in (0, 1, 2, 3), report.stderr[-2000:]
    text = report.stdout
    assert "the hello probe answered" in text  # the finding
    assert "#### Probe hello_probe" in text  # the generic appendix section
    assert f"| pid | {result['data']['pid']} | the runner's process id |" in text  # value, meaning from SHAPE
    # host text is escaped on its way into the report: no raw HTML, no pipe that ends a table cell
    assert "hello \\| \\<b>from\\</b> the overlay" in text
    assert "<b>from" not in text.replace("\\<b>from", "")


def test_the_real_tree_has_no_hello_probe():
    """The probe above exists only in the test's copy of the tree."""
    assert not (ROOT / "probes" / "hello_probe.py").exists()


def test_the_declared_shape_checks_stored_data(tmp_path):
    tree = tmp_path / "tree"
    _copy_tree(tree)
    _add_probe(tree)
    code = ("from probes.probe_info import SHAPES\nfrom probes.schemas import check\n"
            "print(check(SHAPES['hello_probe'], {'greeting': 'hi', 'pid': 'seven'}, 'probes.hello_probe.data'))\n"
            "print(check(SHAPES['hello_probe'], {'greeting': 'hi', 'pid': 7}, 'probes.hello_probe.data'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                          env=dict(os.environ, PYTHONPATH=str(tree)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    wrong, right = proc.stdout.splitlines()
    assert "probes.hello_probe.data.pid" in wrong and right in ("None", "[]", "")
