"""Small AST helpers shared by the fact finders: walking with ancestors, names, strings, env reads."""
import ast
import bisect

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
LOG_METHODS = ("warning", "warn", "info", "error", "debug", "critical", "exception")


def walk_with_ancestors(node, ancestors=()):
    """Yield (node, ancestors) depth-first; ancestors are (parent, field) pairs, outermost first."""
    yield node, ancestors
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    for pair in walk_with_ancestors(item, ancestors + ((node, field),)):
                        yield pair
        elif isinstance(value, ast.AST):
            for pair in walk_with_ancestors(value, ancestors + ((node, field),)):
                yield pair


def walk_lines(node, lines, ancestors=()):
    """Like walk_with_ancestors, but only into statements and expressions spanning one of `lines`."""
    yield node, ancestors
    for field, value in ast.iter_fields(node):
        for item in (value if isinstance(value, list) else (value,)):
            if not isinstance(item, ast.AST):
                continue
            start = getattr(item, "lineno", None)
            if start is not None:
                end = getattr(item, "end_lineno", None) or start
                index = bisect.bisect_left(lines, start)
                if index >= len(lines) or lines[index] > end:
                    continue
            for pair in walk_lines(item, lines, ancestors + ((node, field),)):
                yield pair


def qualname(ancestors):
    """Class.method name of the scope a node sits in ('<module>' at top level)."""
    names = [parent.name for parent, _ in ancestors if isinstance(parent, SCOPES)]
    return ".".join(names) or "<module>"


def enclosing_functions(ancestors):
    """Function definitions around a node, innermost first."""
    return [parent for parent, _ in reversed(ancestors) if isinstance(parent, FUNCS)]


def unparse(node, limit=200):
    try:
        text = ast.unparse(node)
    except Exception:
        text = "<%s>" % type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def call_name(call):
    """The called name: `f(...)` -> 'f', `a.b.f(...)` -> 'f'."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def field_name(expr):
    """The buffer a copied expression names: `buffers.seq_lens[:bs]` -> 'seq_lens', `dst` -> 'dst'."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value  # x.view(...), x.to(...), x.flatten()
        elif isinstance(expr, ast.Starred):
            expr = expr.value
        else:
            break
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Name):
        return expr.id
    return unparse(expr, 60)


def string_value(node):
    """The text of a string literal, an f-string's literal parts, or a `+` concatenation; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = string_value(node.left)
        right = string_value(node.right) if isinstance(node.op, ast.Add) else ""
        if left is not None and right is not None:
            return left + right
    return None


def env_var_read(node):
    """The environment variable a expression reads, or None.

    Knows `envs.NAME.get()` / `envs.NAME.value`, `os.environ.get("NAME")`, `os.environ["NAME"]`,
    `os.getenv("NAME")` and helpers named like `get_bool_env_var("NAME")`.
    """
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "value") and \
                isinstance(func.value, ast.Attribute) and _names_envs(func.value.value):
            return func.value.attr
        name = call_name(node) or ""
        if node.args and ("env" in name.lower() or (name == "get" and _is_os_environ(func))):
            text = string_value(node.args[0])
            if text and text.replace("_", "").isalnum():
                return text
    if isinstance(node, ast.Attribute) and node.attr == "value" and isinstance(node.value, ast.Attribute) \
            and _names_envs(node.value.value):
        return node.value.attr
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return string_value(node.slice)
    return None


def _names_envs(node):
    return isinstance(node, ast.Name) and node.id.lower() in ("envs", "env", "environ", "environment")


def _is_environ(node):
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or \
        (isinstance(node, ast.Name) and node.id == "environ")


def _is_os_environ(func):
    return isinstance(func, ast.Attribute) and _is_environ(func.value)


def env_vars_in(node):
    """Every environment variable read anywhere inside node."""
    found = []
    for child in ast.walk(node):
        name = env_var_read(child)
        if name and name not in found:
            found.append(name)
    return found


def names_in(node):
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}
