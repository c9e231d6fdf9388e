"""Renderers read findings through gpudiag.findings' public API and probe data through gpudiag.probe_view only."""

import ast
from pathlib import Path

import gpudiag.findings as findings_api

RENDER = Path(__file__).resolve().parents[2] / "gpudiag" / "render"


def _findings_imports(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpudiag.findings"):
            yield node.lineno, node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gpudiag.findings"):
                    yield node.lineno, alias.name, []


def test_render_modules_import_only_the_findings_public_api():
    private, checked = [], 0
    for path in sorted(RENDER.glob("*.py")):
        for line, module, names in _findings_imports(path):
            checked += 1
            if module != "gpudiag.findings":
                private.append(f"{path.name}:{line} imports {module}")
            for name in names:
                if name not in findings_api.__all__:
                    private.append(f"{path.name}:{line} imports {name}, not in gpudiag.findings.__all__")
    assert checked, "the render package imports nothing from gpudiag.findings: this check would pass vacuously"
    assert not private, "\n".join(private)


def test_the_check_catches_a_private_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpudiag.findings.copies import ok_timing\nimport gpudiag.findings.facts\n")
    assert [m for _, m, _ in _findings_imports(bad)] == ["gpudiag.findings.copies", "gpudiag.findings.facts"]


def test_public_api_names_exist():
    missing = [name for name in findings_api.__all__ if not hasattr(findings_api, name)]
    assert not missing
