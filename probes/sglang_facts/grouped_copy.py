"""Every `_grouped_foreach_copy_`: its definitions, their fast paths, the flag, and every call site."""
import ast
import re

from probes.sglang_facts.astutil import (FUNCS, SCOPES, call_name, enclosing_functions, env_var_read, env_vars_in,
                                         names_in, qualname, unparse, walk_lines)
from probes.sglang_facts.copied import copied_fields
from probes.sglang_facts.reach import reachability

FUNC = "_grouped_foreach_copy_"
FLAG = "_has_foreach_copy"
ALIAS = re.compile(FUNC + r"\s+as\s+(\w+)")


def find_grouped_copy(tree, resolver):
    files = tree.containing(FUNC.encode())
    definitions, flags, call_sites = [], [], []
    for rel in files:
        parsed = tree.tree(rel)
        if parsed is None:
            continue
        module = tree.module_of(rel)
        hits = list(tree.line_hits(b"foreach_copy", [rel]))
        aliases = {FUNC} | set(m.group(1) for _, _, text in hits for m in ALIAS.finditer(text))
        lines = sorted(set(line for _, line, _ in hits) |
                       set(line for name in aliases - {FUNC} for _, line, _ in tree.line_hits(name, [rel])))
        for node, ancestors in walk_lines(parsed, lines):
            if isinstance(node, FUNCS) and node.name == FUNC:
                definitions.append(tree.evidence(rel, node.lineno, module=module, qualname=_qual(node, ancestors),
                                                 fast_paths=fast_paths(tree, rel, node)))
            elif isinstance(node, ast.Assign) and not any(isinstance(p, SCOPES) for p, _ in ancestors) and \
                    any(isinstance(t, ast.Name) and t.id == FLAG for t in node.targets):
                flags.append(tree.evidence(rel, node.lineno, module=module, value=unparse(node.value, 80)))
            elif isinstance(node, ast.Call) and call_name(node) in aliases:
                call_sites.append(describe_call(tree, resolver, rel, module, node, ancestors))
    return {"definitions": definitions, "has_foreach_copy_flag": flags, "call_sites": call_sites,
            "files_searched": len(files)}


def _qual(node, ancestors):
    outer = qualname(ancestors)
    return node.name if outer == "<module>" else outer + "." + node.name


def describe_call(tree, resolver, rel, module, call, ancestors):
    site = tree.evidence(rel, call.lineno, module=module, qualname=qualname(ancestors))
    funcs = enclosing_functions(ancestors)
    site["fields"], site["dynamic_fields"] = copied_fields(funcs[0], call.args[0], resolver, module) \
        if funcs and call.args else ([], [])
    site["src_fields"] = copied_fields(funcs[0], call.args[1], resolver, module)[0] \
        if funcs and len(call.args) > 1 else []
    site.update(reachability(tree, rel, funcs))
    target = resolver.resolve_call(module, call, ancestors)
    if target and target.get("kind") == "function":
        site["resolves_to"] = {"module": target["module"], "file": target["file"], "line": target["line"]}
    else:
        site["resolves_to"] = None
        site["unresolved"] = "external %s" % target["external"] if target and target.get("external") \
            else "no definition found by following imports"
    return site


def fast_paths(tree, rel, func):
    """Early returns in a definition body: an env-gated single call, or a small-copy kernel tried first."""
    env_locals = {}
    imported_from = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            read = [v for v in env_vars_in(node.value)]
            for target in node.targets:
                if isinstance(target, ast.Name) and read:
                    env_locals[target.id] = read[0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported_from[alias.asname or alias.name] = node.module or ""
    found = []
    for node in ast.walk(func):
        if not isinstance(node, ast.If) or not any(isinstance(s, ast.Return) for s in ast.walk(node)):
            continue
        if not any(isinstance(s, ast.Return) for s in node.body):
            continue
        env = env_vars_in(node.test) or [env_locals[n] for n in sorted(names_in(node.test)) if n in env_locals]
        calls = [c for c in ast.walk(node.test) if isinstance(c, ast.Call) and not env_var_read(c)]
        if env:
            found.append(tree.evidence(rel, node.lineno, kind="env_gated", detail=env[0], env_var=env[0],
                                       condition=unparse(node.test)))
        elif any("copy" in (call_name(c) or "") for c in calls):
            name = next(call_name(c) for c in calls if "copy" in (call_name(c) or ""))
            source = imported_from.get(name)
            detail = name + (" from " + source if source else "")
            found.append(tree.evidence(rel, node.lineno, kind="small_copy_kernel", detail=detail,
                                       function=name, module=source, condition=unparse(node.test)))
    return found
