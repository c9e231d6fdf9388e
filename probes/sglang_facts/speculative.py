"""Speculative decoding as installed: the algorithms offered, the DFlash worker and its draft-graph guards."""
import ast
import re

from probes.sglang_facts.astutil import LOG_METHODS, call_name, string_value, unparse, walk_with_ancestors

ENUM_CLASS = "SpeculativeAlgorithm"
# "Disable DFLASH draft cuda graph because ...": a disabling word, then the graph, in one sentence.
DISABLES_GRAPH = re.compile(r"\b(disabl\w*|skip\w*|not captur\w*)\b[^.]*?cuda[ _-]?graph", re.I)
# A log message's words (not an identifier like capture_cuda_graph): a quote and "cuda graph".
MESSAGE_TEXT = re.compile(r"[\"'].*cuda[ -]?graph|cuda[ -]?graph.*[\"']", re.I)
WORKER_CLASS = rb"^class[ \t]+(\w*[Dd][Ff]lash\w*Worker\w*)"


def find_algorithms(tree):
    """Members of the SpeculativeAlgorithm enum and algorithms registered by calls in the package."""
    members, registered = [], []
    mentions = tree.containing(ENUM_CLASS.encode())
    for rel in [r for r in mentions if b"class " + ENUM_CLASS.encode() in tree.read(r)]:
        parsed = tree.tree(rel)
        for node in ast.walk(parsed) if parsed is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == ENUM_CLASS:
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                            isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id.isupper():
                        members.append(tree.evidence(rel, stmt.lineno, name=stmt.targets[0].id, via="enum"))
    for rel in [r for r in mentions if ENUM_CLASS.encode() + b".register(" in tree.read(r)]:
        parsed = tree.tree(rel)
        for node in ast.walk(parsed) if parsed is not None else ():
            if isinstance(node, ast.Call) and call_name(node) == "register" and \
                    isinstance(node.func, ast.Attribute) and unparse(node.func.value) == ENUM_CLASS and node.args:
                name = string_value(node.args[0])
                if name:
                    registered.append(tree.evidence(rel, node.lineno, name=name.upper(), via="register"))
    return members + [r for r in registered if r["name"] not in {m["name"] for m in members}]


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
