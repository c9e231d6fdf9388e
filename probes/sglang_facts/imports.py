"""Which definition a name resolves to, following imports, package re-exports and aliases statically."""
import ast

from probes.sglang_facts.astutil import FUNCS, enclosing_functions

MAX_DEPTH = 25


def absolute_module(current, is_package, level, module):
    """The absolute dotted module of `from <level dots><module> import ...` written in `current`."""
    if not level:
        return module or ""
    parts = current.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[:len(parts) - (level - 1)]
    base = ".".join(parts)
    return base + ("." + module if module else "") if base else (module or "")


class Resolver(object):
    """Static name resolution over a SourceTree; parses only the modules it walks through."""

    def __init__(self, tree):
        self.tree = tree
        self._bindings = {}

    def bindings(self, module):
        """{name: [binding]} for a module's top level (into if/try/with, not into defs)."""
        if module in self._bindings:
            return self._bindings[module]
        rel = self.tree.file_of(module)
        parsed = self.tree.tree(rel) if rel else None
        table = {}
        if parsed is not None:
            self._collect(parsed.body, module, rel, table, fallback=False)
        self._bindings[module] = table
        return table

    def _collect(self, body, module, rel, table, fallback):
        is_pkg = rel.endswith("__init__.py")
        for node in body:
            if isinstance(node, FUNCS + (ast.ClassDef,)):
                _add(table, node.name, ("def", node, fallback))
            elif isinstance(node, ast.ImportFrom):
                base = absolute_module(module, is_pkg, node.level, node.module)
                for alias in node.names:
                    _add(table, alias.asname or alias.name, ("from", (base, alias.name, node), fallback))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else alias.name.split(".")[0]
                    _add(table, bound, ("module", (target, node), fallback))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Name):
                kind = "alias" if isinstance(node.value, (ast.Name, ast.Attribute)) else "value"
                _add(table, node.targets[0].id, (kind, node, fallback))
            elif isinstance(node, ast.If):
                self._collect(node.body, module, rel, table, fallback)
                self._collect(node.orelse, module, rel, table, True)
            elif isinstance(node, ast.Try):
                self._collect(node.body + node.orelse + node.finalbody, module, rel, table, fallback)
                for handler in node.handlers:
                    self._collect(handler.body, module, rel, table, True)
            elif isinstance(node, ast.With):
                self._collect(node.body, module, rel, table, fallback)

    def resolve(self, module, name, depth=0):
        """Where `name` as seen in `module` is defined: a dict, or None when unknown."""
        if depth > MAX_DEPTH:
            return None
        entries = self.bindings(module).get(name)
        if entries:
            primary = [e for e in entries if not e[2]] or entries
            return self._follow(module, primary[-1], depth)
        for star in self.bindings(module).get("*", []):
            found = self._from(star[1][0], name, star[1][2], depth)
            if found and not found.get("external"):
                return found
        submodule = module + "." + name
        if self.tree.file_of(submodule) and self.tree.is_package(module):
            return self._module_result(submodule)
        return None

    def _follow(self, module, entry, depth):
        kind, data, _ = entry
        rel = self.tree.file_of(module)
        if kind == "def":
            return {"module": module, "name": data.name, "file": rel, "line": data.lineno,
                    "kind": "class" if isinstance(data, ast.ClassDef) else "function"}
        if kind == "from":
            base, imported, node = data
            return self._from(base, imported, node, depth)
        if kind == "module":
            return self._module_result(data[0])
        if kind == "alias":
            return self.resolve_expr(module, data.value, depth + 1)
        return {"module": module, "name": data.targets[0].id, "file": rel, "line": data.lineno, "kind": "value"}

    def _from(self, base, imported, node, depth):
        if self.tree.file_of(base) is None:
            return {"external": base, "name": imported}
        if imported == "*":
            return None
        found = self.resolve(base, imported, depth + 1)
        if found is None and self.tree.file_of(base + "." + imported):
            return self._module_result(base + "." + imported)
        return found

    def _module_result(self, module):
        rel = self.tree.file_of(module)
        if rel is None:
            return {"external": module, "name": None}
        return {"module": module, "name": None, "file": rel, "line": 1, "kind": "module"}

    def resolve_expr(self, module, expr, depth=0, local=None):
        """Resolve a Name or dotted Attribute expression seen in module (local: function-level bindings)."""
        if isinstance(expr, ast.Name):
            if local and expr.id in local:
                return self._follow(module, local[expr.id][-1], depth)
            return self.resolve(module, expr.id, depth)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(module, expr.value, depth + 1, local)
            if base and base.get("kind") == "module":
                return self.resolve(base["module"], expr.attr, depth + 1)
        return None

    def resolve_call(self, module, call, ancestors):
        """The definition a call's function resolves to, honouring imports inside enclosing functions."""
        local = {}
        rel = self.tree.file_of(module)
        for func in reversed(enclosing_functions(ancestors)):  # outermost first, inner ones override
            table = {}
            self._collect(_imports_only(func.body), module, rel, table, fallback=False)
            local.update(table)
        return self.resolve_expr(module, call.func, 0, local)


def _add(table, name, entry):
    table.setdefault(name, []).append(entry)


def _imports_only(body):
    """Import statements anywhere in a function body (not in nested functions)."""
    found = []
    stack = list(body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif not isinstance(node, FUNCS + (ast.ClassDef,)):
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return found
