"""Which buffers a grouped copy fills: the field names behind the tensors in its list, never a loop variable.

A list is built from a literal, `.append`/`.extend` calls, and helpers it is handed to
(0.5.23's `refresh_track_indices(buffers.mamba_track_indices, ..., copy_dsts=copy_dsts)` appends for
the caller). A tensor taken from a loop over a container (`for slot in self._slots.values(): dst =
slot.buffer[:n]`) has no fixed name: it is reported as dynamic, with the loop it comes from.
"""
import ast

from probes.sglang_facts.astutil import FUNCS, call_name, unparse

MAX_ASSIGN_DEPTH = 3


def copied_fields(func, arg, resolver=None, module=None):
    """(fields, dynamic): field names in source order, and descriptions of run-time-chosen tensors."""
    scope = _Scope(func)
    if isinstance(arg, (ast.List, ast.Tuple)):
        elements = _positioned(arg.elts, scope)
    elif isinstance(arg, ast.Name):
        elements = _list_elements(func, arg.id, scope, resolver, module)
    else:
        elements = _positioned([arg], scope)
    fields, dynamic = [], []
    for _, kind, text in sorted(elements, key=lambda e: e[0]):
        target = fields if kind == "field" else dynamic
        if text not in target:
            target.append(text)
    return fields, dynamic


class _Scope(object):
    """A function's loop variables and simple local assignments, for naming what a local holds."""

    def __init__(self, func):
        self.loops, self.assigned = {}, {}
        for node in ast.walk(func):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _target_names(node.target):
                    self.loops.setdefault(name, unparse(node.iter, 80))
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigned.setdefault(node.targets[0].id, node.value)

    def describe(self, expr, depth=0):
        """('field', name) or ('dynamic', description) for one copied tensor expression."""
        base = _strip(expr)
        if isinstance(base, ast.Name) and base.id in self.assigned and depth < MAX_ASSIGN_DEPTH:
            return self.describe(self.assigned[base.id], depth + 1)
        # A tensor chosen by a loop (`slot.buffer`, `self._slots[name].buffer`, `proxy.tensors[key]`); a loop
        # variable inside a slice (`buf[:bs]`) only sizes the copy.
        looped = [n for n in _chosen_by(expr) if n in self.loops]
        if looped:
            return "dynamic", "%s for each %s in %s" % (unparse(_strip_slices(expr), 60), looped[0],
                                                        self.loops[looped[0]])
        if isinstance(base, ast.Attribute):
            return "field", base.attr
        if isinstance(base, ast.Name):
            return "field", base.id
        if isinstance(base, ast.Call):  # a computed source (`local = compute_local_num_token_non_padded(...)`)
            return "field", "%s()" % (call_name(base) or "call")
        return "field", unparse(base, 60)


def _strip(expr):
    """`buffers.seq_lens[:bs]` -> `buffers.seq_lens`; `x.view(...)`, `x.to(...)`, `*x` -> x."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        elif isinstance(expr, ast.Starred):
            expr = expr.value
        else:
            return expr


def _chosen_by(expr):
    """Names that pick the tensor: every name in the expression except those inside slices."""
    names, stack = [], [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Slice):
            continue
        if isinstance(node, ast.Name):
            names.append(node.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _strip_slices(expr):
    """`buf[:dim]` -> `buf`, keeping indexing (`tensors[key]`) and method calls out of the text."""
    while isinstance(expr, ast.Subscript) and _is_slice(expr.slice) or \
            isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.value if isinstance(expr, ast.Subscript) else expr.func.value
    return expr


def _is_slice(node):
    if hasattr(ast, "Index") and isinstance(node, ast.Index):
        node = node.value  # Python 3.8 wraps subscripts
    return isinstance(node, ast.Slice) or (isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice)
                                                                                 for e in node.elts))


def _root_name(expr):
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _target_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    return []


def _positioned(elements, scope, at=None):
    out = []
    for element in elements:
        kind, text = scope.describe(element)
        out.append((at or (element.lineno, element.col_offset), kind, text))
    return out


def _list_elements(func, name, scope, resolver, module):
    """Everything put into the local list `name`: its literal, appends, extends, and helpers' appends."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                found.extend(_positioned(node.value.elts, scope))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == name and isinstance(node.value, (ast.List, ast.Tuple)):
            found.extend(_positioned(node.value.elts, scope))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == name and node.args:
            if node.func.attr == "append":
                found.extend(_positioned(node.args[:1], scope))
            elif node.func.attr == "extend" and isinstance(node.args[0], (ast.List, ast.Tuple)):
                found.extend(_positioned(node.args[0].elts, scope))
        elif isinstance(node, ast.Call) and resolver is not None and _passes(node, name):
            found.extend(_helper_elements(func, node, name, scope, resolver, module))
    return found


def _passes(call, name):
    return any(isinstance(a, ast.Name) and a.id == name for a in call.args) or \
        any(isinstance(k.value, ast.Name) and k.value.id == name for k in call.keywords)


def _helper_elements(func, call, name, scope, resolver, module):
    """What a helper appends to the list it is handed, named by the caller's own arguments."""
    helper = _definition(resolver, module, func, call)
    if helper is None:
        return []
    params = [a.arg for a in helper.args.args + helper.args.kwonlyargs]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    bound = {}
    for index, value in enumerate(call.args):
        if index < len(params):
            bound[params[index]] = value
    for keyword in call.keywords:
        if keyword.arg:
            bound[keyword.arg] = keyword.value
    inner = [p for p, value in bound.items() if isinstance(value, ast.Name) and value.id == name]
    found = []
    for node in ast.walk(helper):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in inner and node.args:
            appended = _strip(node.args[0])
            root = _root_name(appended)
            source = bound.get(root) if isinstance(appended, ast.Name) else None
            kind, text = scope.describe(source) if source is not None else ("field", unparse(appended, 60))
            found.append(((call.lineno, call.col_offset), kind, text))
    return found


def _definition(resolver, module, func, call):
    target = resolver.resolve_call(module, call, ((func, "body"),))
    if not target or target.get("kind") != "function" or not target.get("file"):
        return None
    parsed = resolver.tree.tree(target["file"])
    for node in ast.walk(parsed) if parsed is not None else ():
        if isinstance(node, FUNCS) and node.lineno == target["line"]:
            return node
    return None
