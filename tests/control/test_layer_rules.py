"""The rules two package docstrings state, read from the source (AST, calls inside functions included):
gpudiag.cli's (only it exits and writes messages; which other modules write to the terminal or to files) and
gpudiag.findings' (its theme modules are its own; only the layers above it import it, by its public names)."""
import ast
from pathlib import Path

import gpudiag.findings as findings_api

ROOT = Path(__file__).resolve().parents[2]

# Outside gpudiag.cli, the modules the docstring of gpudiag/cli/__init__.py names.
STD_STREAM_WRITERS = {"gpudiag.transports.known_hosts"}
FILE_WRITERS = {
    "gpudiag.store",
    "gpudiag.atomic_files",
    "gpudiag.run_journal",
    "gpudiag.transports.hostkeys",
    "gpudiag.render.plots",
    "gpudiag.derived_files",
    "gpudiag.user_key",
}
# The layers above gpudiag.findings, the docstring of gpudiag/findings/__init__.py names.
FINDINGS_IMPORTERS = ("gpudiag.cli", "gpudiag.render", "gpudiag.rundiff")

EXITS_AND_MESSAGES = {"sys.exit", "os._exit", "exit", "quit", "print", "click.echo", "click.secho"}
WRITE_CALLS = {"os.replace", "os.rename", "os.remove", "os.unlink", "os.makedirs", "os.mkdir"}
WRITE_METHODS = {"write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir", "savefig", "symlink_to"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _modules():
    for path in sorted((ROOT / "gpudiag").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        yield name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _inside(name, package):
    return name == package or name.startswith(package + ".")


def _dotted(node):
    """'sys.exit' for sys.exit, 'print' for print; '' for anything not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _opens_for_writing(call):
    name = _dotted(call.func)
    if name == "os.open":
        return any(isinstance(n, ast.Attribute) and n.attr in WRITE_FLAGS for a in call.args for n in ast.walk(a))
    if name not in ("open", "os.fdopen") and not (isinstance(call.func, ast.Attribute) and call.func.attr == "open"):
        return False
    # open(path, mode) and os.fdopen(fd, mode) take the mode second; Path.open(mode) first.
    position = 0 if isinstance(call.func, ast.Attribute) and name not in ("os.fdopen",) else 1
    modes = [k.value for k in call.keywords if k.arg == "mode"]
    modes += [call.args[position]] if len(call.args) > position else []
    return any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes)


def exits_and_messages(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) in EXITS_AND_MESSAGES:
            yield node.lineno, _dotted(node.func)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if _dotted(raised) == "SystemExit":
                yield node.lineno, "raise SystemExit"


def std_streams(tree):
    for node in ast.walk(tree):
        if _dotted(node) in ("sys.stdout", "sys.stderr", "sys.__stdout__", "sys.__stderr__"):
            yield node.lineno, _dotted(node)


def file_writes(tree):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name in WRITE_CALLS or name.startswith("shutil.") or _opens_for_writing(node):
            yield node.lineno, name or "open"
        elif isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
            yield node.lineno, f".{node.func.attr}"


def findings_imports(tree):
    """(line, module, names) for each import of gpudiag.findings or anything inside it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _inside(node.module, "gpudiag.findings"):
                yield node.lineno, node.module, [a.name for a in node.names]
            elif node.module == "gpudiag" and any(a.name == "findings" for a in node.names):
                yield node.lineno, "gpudiag.findings", []
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _inside(alias.name, "gpudiag.findings"):
                    yield node.lineno, alias.name, []


def _outside_cli(check, allowed=()):
    return [
        f"{name}:{line} {what}"
        for name, tree in _modules()
        if not _inside(name, "gpudiag.cli") and name not in allowed
        for line, what in check(tree)
    ]


def test_only_the_cli_exits_and_writes_messages():
    assert _outside_cli(exits_and_messages) == []


def test_only_the_cli_and_the_named_modules_touch_stdout_and_stderr():
    assert _outside_cli(std_streams, STD_STREAM_WRITERS) == []


def test_only_the_cli_and_the_named_modules_write_files():
    assert _outside_cli(file_writes, FILE_WRITERS) == []


def test_the_named_writers_still_write():
    # A module named above that stopped writing would leave the docstring saying what is no longer true.
    modules = dict(_modules())
    assert {"sys.exit", "click.echo"} <= {what for _, what in exits_and_messages(modules["gpudiag.cli"])}
    assert [n for n in sorted(FILE_WRITERS) if not list(file_writes(modules[n]))] == []
    assert [n for n in sorted(STD_STREAM_WRITERS) if not list(std_streams(modules[n]))] == []


def test_nothing_outside_findings_imports_its_theme_modules_or_private_names():
    themes = {p.stem for p in (ROOT / "gpudiag" / "findings").glob("*.py")} - {"__init__"}
    private = []
    for name, tree in _modules():
        if _inside(name, "gpudiag.findings"):
            continue
        for line, module, names in findings_imports(tree):
            if module != "gpudiag.findings":
                private.append(f"{name}:{line} imports {module}")
            private += [f"{name}:{line} imports {n}" for n in names if n in themes or n not in findings_api.__all__]
    assert private == []


def test_only_the_layers_above_findings_import_it():
    below = [
        f"{name}:{line} imports {module}"
        for name, tree in _modules()
        if not _inside(name, "gpudiag.findings") and not any(_inside(name, top) for top in FINDINGS_IMPORTERS)
        for line, module, _ in findings_imports(tree)
    ]
    assert below == []


def test_the_checks_see_what_they_forbid():
    tree = ast.parse(
        "import sys, os, click\nfrom gpudiag.findings.facts import host_facts\nfrom gpudiag import findings\n"
        "def f(p):\n    click.echo('x')\n    print(1)\n    sys.stderr.write('y')\n    raise SystemExit(2)\n"
        "def g(p):\n    open(p, 'w')\n    p.open('a')\n    p.write_text('z')\n    os.replace(p, p)\n"
        "    os.open(p, os.O_WRONLY | os.O_CREAT)\n    open(p)\n    p.open('rb')\n    'a'.replace('a', 'b')\n"
    )
    assert [what for _, what in sorted(exits_and_messages(tree))] == ["click.echo", "print", "raise SystemExit"]
    assert [what for _, what in std_streams(tree)] == ["sys.stderr"]
    assert sorted(line for line, _ in file_writes(tree)) == [10, 11, 12, 13, 14]
    assert [module for _, module, _ in sorted(findings_imports(tree))] == ["gpudiag.findings.facts", "gpudiag.findings"]
