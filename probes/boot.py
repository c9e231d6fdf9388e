"""The bootstrap that runs probe code from in-memory module sources, so nothing lands on the host's disk.

One text serves every process gpudiag starts on a host: the control side runs the probe runner with it,
and probes run their crash-prone children (copy benchmark, graph capture) with it. The first stdin line is
one JSON document: `modules` ({dotted name: [is_package, source]}) or `root` (a directory holding `probes/`,
for runs from a checkout), and `entry` ("module:function", called with the document). Later stdin lines
belong to the entry.
"""
import base64
import json
import os
import sys

BOOTSTRAP = r'''import sys, json, linecache, importlib, importlib.abc, importlib.util
P = json.loads(sys.stdin.buffer.readline().decode("utf-8"))
M = P.get("modules") or {}
class F(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name in M:
            return importlib.util.spec_from_loader(name, self, is_package=M[name][0])
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        is_pkg, src = M[module.__name__]
        fn = "<gpudiag>/" + module.__name__.replace(".", "/") + ("/__init__.py" if is_pkg else ".py")
        linecache.cache[fn] = (len(src), None, src.splitlines(True), fn)
        if is_pkg:
            module.__path__ = []
        exec(compile(src, fn, "exec"), module.__dict__)
if M:
    sys.meta_path.insert(0, F())
elif P.get("root"):
    sys.path.insert(0, P["root"])
E, _, N = P.get("entry", "probes.runner:main").partition(":")
sys.exit(getattr(importlib.import_module(E), N)(P))
'''

# The `-c` argument itself is one line of base64 (no newline, no single quote, no `$` or `!`): csh and
# tcsh login shells, which ssh runs the command with, reject a newline inside quotes. base64 only, no
# zlib: some minimal interpreters are built without it.
BOOTSTRAP_COMMAND = 'import base64;exec(base64.b64decode("%s"))' % base64.b64encode(
    BOOTSTRAP.encode("utf-8")).decode("ascii")


def child_argv(python=None):
    """argv of a child that runs probe code: `PYTHON -I -c BOOTSTRAP_COMMAND` (BOOTSTRAP, one line)."""
    return [python or sys.executable, "-I", "-c", BOOTSTRAP_COMMAND]


def child_payload(entry, modules=None, **fields):
    """The first stdin line for a child: the bundle's modules when the probe has them (it runs from the
    bundle), else the checkout's root directory (a run from source, as in tests)."""
    doc = dict(fields, entry=entry)
    if modules:
        doc["modules"] = {k: list(v) for k, v in modules.items()}
    else:
        doc["root"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (json.dumps(doc) + "\n").encode("utf-8")


def local_modules():
    """The probes package read from this checkout, in the bundle's form (tests add modules to it)."""
    root = os.path.dirname(os.path.abspath(__file__))
    modules = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        dotted = os.path.relpath(folder, os.path.dirname(root)).replace(os.sep, ".")
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                source = fh.read()
            if name == "__init__.py":
                modules[dotted] = [True, source]
            else:
                modules[dotted + "." + name[:-3]] = [False, source]
    return modules
