"""The docs generated from the probes' declarations are current; under GPUDIAG_UPDATE_DOCS=1 this test rewrites
them first (as the golden reports are rewritten), so adding or changing a probe never means editing them by hand."""
import os
import subprocess
import sys
from pathlib import Path

from probes.probe_info import PROBES, SHAPES

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generated-docs.py"


def _script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_generated_docs_are_what_the_declarations_give():
    if os.environ.get("GPUDIAG_UPDATE_DOCS") == "1":
        written = _script()
        assert written.returncode == 0, written.stderr
    check = _script("--check")
    assert check.returncode == 0, check.stderr + "(GPUDIAG_UPDATE_DOCS=1 rewrites them)"


def test_every_declaration_reaches_its_doc():
    data = (ROOT / "docs" / "probe-data.md").read_text(encoding="utf-8")
    options = (ROOT / "docs" / "probe-options.md").read_text(encoding="utf-8")
    for name in SHAPES:
        assert f"\n## {name}\n" in data
    assert "| `gpus[].workloads[].fields[].size_split` | dma\\|foreach |" in data
    for info in PROBES.values():
        assert f"\n## {info.name}\n" in options and info.summary in options
        for option in info.options:
            assert f"| `{option.name}` |" in options
    # copy_bench's PROBE timeout_s and unit costs, stated once
    assert "(limit 900 s; one sweep size on one GPU ~0.15 s, one workload on one GPU ~0.5 s)" in options


def test_a_stale_doc_is_named(tmp_path):
    """--check names the file that differs (run on a copy of the tree with one doc edited)."""
    for part in ("gpudiag", "probes", "scripts", "docs"):
        subprocess.run(["cp", "-r", str(ROOT / part), str(tmp_path / part)], check=True)
    doc = tmp_path / "docs" / "probe-options.md"
    doc.write_text(doc.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(tmp_path / "scripts" / "generated-docs.py"), "--check"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert proc.returncode == 1
    assert proc.stderr.strip() == "docs/probe-options.md is not current: run python scripts/generated-docs.py"
