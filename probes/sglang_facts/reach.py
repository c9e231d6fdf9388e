"""Is a function reached at all? A call site inside a method nothing in the package names is dead code.

0.5.14 keeps `DecodeInputBuffers.populate_from_forward_batch`, with its grouped copy, after the buffer
registry replaced it: only comments still name it. A reference is a name or attribute in code (a call,
a callback, a re-export); text in comments and docstrings does not count.
"""
import ast
import re


def find_reference(tree, name, defined_at):
    """Evidence of the first code reference to `name` other than its own definition, or None.

    Lines are found by a byte search first; only files with a candidate line are parsed, and the
    search stops at the first confirmed reference.
    """
    token = re.compile(r"(?<![\w])%s(?![\w])" % re.escape(name))
    candidates = {}
    for rel, line, text in tree.line_hits(name, tree.containing(name)):
        code = text.split("#", 1)[0]
        if (rel, line) != defined_at and token.search(code) and not code.lstrip().startswith(("def ", "async def ")):
            candidates.setdefault(rel, set()).add(line)
    home = defined_at[0].rsplit("/", 1)[0]
    # Its own file first, then its neighbours: a generic name (`execute`) is most likely called close by.
    for rel in sorted(candidates, key=lambda r: (r != defined_at[0], _distance(r, home), r)):
        parsed = tree.tree(rel)
        for node in ast.walk(parsed) if parsed is not None else ():
            named = (isinstance(node, ast.Attribute) and node.attr == name) or \
                (isinstance(node, ast.Name) and node.id == name) or \
                (isinstance(node, ast.alias) and name in (node.name, node.asname))
            line = getattr(node, "lineno", None)
            if named and (line in candidates[rel] or line is None):
                return tree.evidence(rel, line or min(candidates[rel]), name=name)
    return None


def _distance(rel, home):
    parts, base = rel.rsplit("/", 1)[0].split("/"), home.split("/")
    common = 0
    while common < min(len(parts), len(base)) and parts[common] == base[common]:
        common += 1
    return len(parts) + len(base) - 2 * common


def reachability(tree, rel, funcs):
    """{reachable, reached_from | unreachable}: for a call inside `funcs` (innermost first)."""
    if not funcs:
        return {"reachable": True, "reached_from": "module level"}
    func = funcs[0]
    found = find_reference(tree, func.name, (rel, func.lineno))
    if found:
        return {"reachable": True, "reached_from": found}
    return {"reachable": False, "reached_from": None,
            "unreachable": "nothing in the package refers to %s (only its definition at %s:%d)"
                           % (func.name, rel, func.lineno)}
