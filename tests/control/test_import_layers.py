"""The import graph of gpudiag/ and probes/, read from the source (AST, imports inside functions included): no
cycle between modules and none between packages, so the layers import one way (docs/architecture.md)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules():
    found = {}
    for top in ("gpudiag", "probes"):
        for path in sorted((ROOT / top).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(path, modules):
    """The project modules one file imports: `from pkg import sub` names the submodule, not the package."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
            out |= subs
            if len(subs) < len(node.names) and node.module in modules:
                out.add(node.module)
    return out


def _package(name, modules):
    """gpudiag.findings.copies → gpudiag.findings; a top-level module is its own package."""
    parts = name.split(".")
    if len(parts) > 2:
        return ".".join(parts[:2])
    return name if (ROOT / name.replace(".", "/")).is_dir() or len(parts) == 1 else name


def _cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _graph(by_package):
    modules = _modules()
    edges = {}
    for name, path in modules.items():
        for target in _imports(path, modules):
            a, b = (_package(name, modules), _package(target, modules)) if by_package else (name, target)
            if a != b:
                edges.setdefault(a, set()).add(b)
    return edges


def test_no_module_imports_itself_around_a_cycle():
    assert _cycles(_graph(by_package=False)) == []


def test_no_package_imports_itself_around_a_cycle():
    assert _cycles(_graph(by_package=True)) == []


def test_the_check_sees_a_cycle_when_there_is_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_probe_side_never_imports_the_control_side():
    edges = _graph(by_package=False)
    upward = sorted((a, b) for a, targets in edges.items() if a.startswith("probes") for b in targets
                    if b.startswith("gpudiag"))
    assert upward == []


# The control side's layers, top to bottom (docs/architecture.md): a module imports its own layer or a lower one.
LAYERS = {"gpudiag.cli": 4, "gpudiag.render": 3, "gpudiag.findings": 2, "gpudiag.probe_view": 1, "gpudiag.decode": 1,
          "gpudiag.models": 1, "gpudiag.schema": 1, "gpudiag.run_records": 1, "gpudiag.transports": 1,
          "gpudiag.inventory": 1}


def _rank(package):
    return LAYERS.get(package)


def upward_imports(edges):
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if _rank(a) is not None and _rank(b) is not None and _rank(b) > _rank(a))


def test_the_control_layers_import_downward_only():
    assert upward_imports(_graph(by_package=True)) == []
    # and the check sees one: findings importing a renderer
    assert upward_imports({"gpudiag.findings": {"gpudiag.render"}}) == [("gpudiag.findings", "gpudiag.render")]
