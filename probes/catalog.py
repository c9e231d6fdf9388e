"""The probes gpudiag knows, their sets and what each reads from an earlier one.

One list for both sides: the runner orders and expands a selection with it, and the control side
(gpudiag/bundle.py) reads it to pack the modules a selection needs. Standard library only.

Every probe, built-in or added, declares itself: a top-level `PROBE = {"set": "light" | "deep" | "explicit",
"needs": (...), "order": N, "timeout_s": S, ...}` of literals in `probes/<name>.py` (or `probes/<name>/__init__.py`),
beside its OPTIONS, SHAPE and NOTES (docs/adding-a-probe.md). The catalog reads that literal from the module's
source without importing it, from this directory on disk or from the modules a bundle carries, so a probe is
registered by its own module alone. An `explicit` probe (a load on a production server) runs in neither the
light set nor --deep: only a command that names it selects it.
"""
import ast
import os

SETS = ("light", "deep", "explicit")
# A probe without an `order` runs after those with one, by name: built-in probes order themselves (deployment
# first: it makes the host's one interpreter choice, probes/hostinfo/interpreter.py, which later probes follow).
UNORDERED = 1000


def declaration(source):
    """The literal `PROBE = {...}` of a module's source, or None when it declares none (or not as literals)."""
    if "PROBE" not in source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "PROBE"):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, dict) and value.get("set") in SETS else None
    return None


def declared_in(modules):
    """{probe name: declaration} among {dotted module name: (is_package, source)}: top-level units only."""
    found = {}
    for dotted, (_, source) in sorted(modules.items()):
        parts = dotted.split(".")
        if len(parts) == 2 and parts[0] == "probes":
            decl = declaration(source)
            if decl is not None:
                found[parts[1]] = decl
    return found


def _on_disk():
    """Declarations in this directory when it is one (the control side, a `root` bundle); {} in memory."""
    here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else ""
    if not os.path.isdir(here):
        return {}
    modules = {}
    for entry in sorted(os.listdir(here)):
        path, name = os.path.join(here, entry), entry[:-3] if entry.endswith(".py") else entry
        if os.path.isdir(path):
            path = os.path.join(path, "__init__.py")
        if name.isidentifier() and path.endswith(".py") and os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                modules["probes." + name] = (path.endswith("__init__.py"), handle.read())
    return declared_in(modules)


def in_set(declared, kind):
    """The probes of one set in run order: by their declared `order`, then by name."""
    def rank(name):
        order = declared[name].get("order")
        return (order if isinstance(order, int) else UNORDERED, name)
    return tuple(sorted((n for n in declared if declared[n]["set"] == kind), key=rank))


def catalog(declared):
    """(light, deep, needs): each set in run order, and what each probe reads from."""
    needs = dict((n, tuple(d.get("needs") or ())) for n, d in declared.items())
    return in_set(declared, "light"), in_set(declared, "deep"), needs


def explicit(declared):
    """The probes only their own command selects (never the light set, never --deep)."""
    return in_set(declared, "explicit")


DECLARED = _on_disk()
LIGHT_PROBES, DEEP_PROBES, PROBE_NEEDS = catalog(DECLARED)
EXPLICIT_PROBES = explicit(DECLARED)
ALL_PROBES = LIGHT_PROBES + DEEP_PROBES + EXPLICIT_PROBES


def timeouts(declared):
    """Seconds each long probe gets (its PROBE["timeout_s"]); the others take the light probes' limit."""
    return dict((n, float(d["timeout_s"])) for n, d in declared.items()
                if isinstance(d.get("timeout_s"), (int, float)))


PROBE_TIMEOUTS = timeouts(DECLARED)


def with_needs(probes, known=None, needs=None):
    """The probes and, transitively, what they read from, in run order; unknown names kept at the end."""
    known = ALL_PROBES if known is None else known
    needs = PROBE_NEEDS if needs is None else needs
    wanted, pending = set(), list(probes)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(needs.get(name, ()))
    return [p for p in known if p in wanted] + [p for p in probes if p not in known]


def declarations(modules=None):
    """Every probe's declaration, those in `modules` (a bundle's) included."""
    declared = dict(DECLARED)
    declared.update(declared_in(modules or {}))
    return declared


def plan(requested, modules=None):
    """(run order, unknown names) for a selection; `modules` (the bundle's) adds the probes declared in it."""
    declared = declarations(modules)
    light, deep, needs = catalog(declared)
    known = light + deep + explicit(declared)
    wanted = with_needs(list(requested or light), known, needs)
    return [p for p in known if p in wanted], [p for p in wanted if p not in known]
