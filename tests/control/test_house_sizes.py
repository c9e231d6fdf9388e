"""Small parts, held: no module of gpudiag/ or probes/ over 300 lines and no function over 60 (DESIGN.md), read
from the source, so a module that grows past them is split along its jobs when it grows, not a round later."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60


def _sources():
    for top in ("gpudiag", "probes"):
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_60_lines():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}
