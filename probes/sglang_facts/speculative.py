"""Speculative decoding as installed: the algorithms offered, the DFlash worker and its draft-graph guards."""
import ast
import re

from probes.sglang_facts.astutil import (FUNCS, LOG_METHODS, call_name, names_in, string_value, unparse,
                                         walk_with_ancestors)

ENUM_CLASS = "SpeculativeAlgorithm"
# "Disable DFLASH draft cuda graph because ...": a disabling word, then the graph, in one sentence.
DISABLES_GRAPH = re.compile(r"\b(disabl\w*|skip\w*|not captur\w*)\b[^.]*?cuda[ _-]?graph", re.I)
# A log message's words (not an identifier like capture_cuda_graph): a quote and "cuda graph".
MESSAGE_TEXT = re.compile(r"[\"'].*cuda[ -]?graph|cuda[ -]?graph.*[\"']", re.I)
WORKER_CLASS = rb"^class[ \t]+(\w*[Dd][Ff]lash\w*Worker\w*)"


def find_algorithms(tree):
    """Members of the SpeculativeAlgorithm enum and algorithms registered by calls in the package.

    Registration takes several forms across releases: `SpeculativeAlgorithm.register("NONE")` (0.5.5+,
    also as a decorator), and helpers that wrap it, such as 0.5.5-0.5.7's
    `register_speculative_algorithm("EAGLE", aliases=("NEXTN",), ...)`. A helper counts when it passes its
    own first parameter on to a registration call, so a renamed helper is still followed.
    """
    members = []
    mentions = tree.containing(ENUM_CLASS.encode())
    for rel in [r for r in mentions if b"class " + ENUM_CLASS.encode() in tree.read(r)]:
        parsed = tree.tree(rel)
        for node in ast.walk(parsed) if parsed is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == ENUM_CLASS:
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                            isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id.isupper():
                        members.append(tree.evidence(rel, stmt.lineno, name=stmt.targets[0].id, via="enum"))
    known = {m["name"] for m in members}
    registered = []
    for found in registrations(tree):
        if found["name"] not in known:
            known.add(found["name"])
            registered.append(found)
    return members + registered


def registrations(tree):
    """Module-level registration calls (decorators included) with a literal name, in source order.

    Helpers live beside the classmethod's callers; their own callers are found by their names."""
    direct = tree.containing(ENUM_CLASS.encode() + b".register(")
    registrars = registrar_functions([(rel, tree.tree(rel)) for rel in direct if tree.tree(rel) is not None])
    files = set(direct)
    for name in registrars:
        files.update(tree.containing(name.encode()))
    found = []
    for rel in sorted(files):
        module = tree.tree(rel)
        if module is None:
            continue
        for node, ancestors in walk_with_ancestors(module):
            if not isinstance(node, ast.Call) or any(isinstance(p, FUNCS) for p, _ in ancestors):
                continue
            via = _registrar_of(node, registrars)
            name = _registered_name(node) if via else None
            if name:
                found.append(tree.evidence(rel, node.lineno, name=name.upper(), via=via,
                                           aliases=_aliases(node)))
    return sorted(found, key=lambda f: (f["file"], f["line"]))


def registrar_functions(parsed):
    """Names of module-level functions that forward their first parameter to a registration call."""
    registrars = set()
    functions = [node for _, module in parsed for node in module.body if isinstance(node, FUNCS)]
    changed = True
    while changed:  # a helper may wrap another helper
        changed = False
        for func in functions:
            if func.name in registrars or not func.args.args:
                continue
            carried = _carrying(func, func.args.args[0].arg)
            for call in ast.walk(func):
                if isinstance(call, ast.Call) and _registrar_of(call, registrars) and \
                        any(isinstance(a, ast.Name) and a.id in carried for a in call.args[:1]):
                    registrars.add(func.name)
                    changed = True
                    break
    return registrars


def _carrying(func, param):
    """The parameter and the local names assigned from it (`name_upper = name.upper()`)."""
    carried = {param}
    for _ in range(3):
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and names_in(node.value) & carried:
                carried.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return carried


def _registrar_of(call, registrars):
    """'register' for `SpeculativeAlgorithm.register(...)`, the helper's name for a known helper, else None."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "register" and unparse(func.value) == ENUM_CLASS:
        return "register"
    name = call_name(call)
    # A helper is called by name or through its module (`spec_info.register_speculative_algorithm(...)`);
    # another object's `.register(...)` is not one, whatever helpers are called.
    if name in registrars and (isinstance(func, ast.Name) or name != "register"):
        return name
    return None


def _registered_name(call):
    if call.args:
        return string_value(call.args[0])
    for keyword in call.keywords:
        if keyword.arg == "name":
            return string_value(keyword.value)
    return None


def _aliases(call):
    for keyword in call.keywords:
        if keyword.arg == "aliases" and isinstance(keyword.value, (ast.List, ast.Tuple)):
            return [string_value(e).upper() for e in keyword.value.elts if string_value(e)]
    return []


def find_dflash(tree, algorithms):
    """The DFlash worker file(s) and the conditions under which they skip the draft CUDA graph."""
    names = [rel for rel in tree.files if "dflash" in rel.rsplit("/", 1)[-1].lower()]
    workers = [tree.evidence(rel, line, **{"class": m.group(1).decode()})
               for rel, line, m in tree.search(WORKER_CLASS, names)]
    guards = []
    for rel in _unique(w["file"] for w in workers):
        for line in sorted(set(line for _, line, text in tree.line_hits(b"raph", [rel]) if MESSAGE_TEXT.search(text))):
            guards.extend(g for g in draft_graph_guards(tree, rel, tree.function_at(rel, line))
                          if (g["line"], g["message"]) not in {(o["line"], o["message"]) for o in guards})
    in_enum = any(a["name"] == "DFLASH" for a in algorithms)
    return {"present": bool(workers) or in_enum, "in_algorithms": in_enum,
            "worker_file": workers[0]["file"] if workers else None, "workers": workers,
            "draft_graph_guards": guards}


def draft_graph_guards(tree, rel, parsed):
    """Log calls that say a CUDA graph is disabled or skipped, with the conditions that lead there.

    `condition` is the test of the if whose branch turns the capture flag off (`capture_... = False`), not
    an if that only decides whether to log (`if self._target_tp_rank == 0:`); `conditions` is the chain of
    tests down to it, `log_conditions` the tests below it that only gate the message."""
    if parsed is None:
        return []
    guards = []
    for node, ancestors in walk_with_ancestors(parsed):
        if not (isinstance(node, ast.Call) and call_name(node) in LOG_METHODS and node.args):
            continue
        message = string_value(node.args[0])
        if not message or not DISABLES_GRAPH.search(message):
            continue
        depth, flag = disabling_branch(ancestors)
        conditions = branch_conditions(ancestors)
        chain = branch_conditions(ancestors[:depth + 1]) if depth is not None else conditions
        guards.append(tree.evidence(rel, node.args[0].lineno, message=message, call_line=node.lineno,
                                    condition=chain[-1] if chain else None, conditions=chain,
                                    log_conditions=conditions[len(chain):], disables=flag,
                                    function=_function(ancestors)))
    return guards


def disabling_branch(ancestors):
    """(index in ancestors, flag name) of the innermost if-branch around a node that sets a flag to False
    (`capture_decode_cuda_graph = False`, `self.use_cuda_graph = False`); (None, None) when there is none."""
    for index in range(len(ancestors) - 1, -1, -1):
        parent, field = ancestors[index]
        if not isinstance(parent, ast.If):
            continue
        for stmt in getattr(parent, field, None) or []:
            flag = _set_false(stmt)
            if flag:
                return index, flag
    return None, None


def _set_false(stmt):
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is False:
        names = [unparse(target) for target in stmt.targets if isinstance(target, (ast.Name, ast.Attribute))]
        return names[0] if names else None
    return None


def branch_conditions(ancestors):
    """The if-tests a node sits under, outermost first; `not (...)` when it sits in an else branch."""
    conditions = []
    for parent, field in ancestors:
        if isinstance(parent, (ast.If, ast.While)):
            text = unparse(parent.test)
            conditions.append(text if field == "body" else "not (%s)" % text)
    return conditions


def _function(ancestors):
    names = [p.name for p, _ in ancestors if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return ".".join(names) or "<module>"


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
