"""The EAGLE draft and draft-extend CUDA-graph runners: how their replay copies inputs into static buffers."""
import ast

from probes.sglang_facts.astutil import FUNCS, call_name, field_name, unparse, walk_lines
from probes.sglang_facts.copied import copied_fields
from probes.sglang_facts.grouped_copy import FUNC

RUNNERS = (("draft", "EAGLEDraftCudaGraphRunner"), ("draft_extend", "EAGLEDraftExtendCudaGraphRunner"))
LARGE_FIELD = "hidden_states"
# Every key a finding may read, for a runner that is absent or copies nothing: `batched` is None
# (not known), never False, so no rule reads an absent runner as a slow one.
NOT_FOUND = {"found": False, "file": None, "line": None, "replay_method": None, "batched": None,
             "grouped_calls": 0, "grouped_fields": [], "grouped_resolves_to": [], "per_tensor_copies": 0,
             "per_tensor_fields": [], "hidden_states_separate": None, "evidence": []}


def find_eagle_runners(tree, resolver):
    classes = {}
    for rel in tree.containing(b"class EAGLEDraft"):
        parsed = tree.tree(rel)
        if parsed is None:
            continue
        for node in _classes(parsed):
            if node.name not in classes:
                classes[node.name] = (rel, node)
    result = {}
    for key, name in RUNNERS:
        if name in classes:
            rel, node = classes[name]
            result[key] = describe_runner(tree, resolver, rel, node)
        else:
            result[key] = dict(NOT_FOUND, **{"class": name, "reason": "no class %s in the package" % name})
    return result


def _classes(parsed):
    """Top-level classes, and classes under module-level if/try (not inside functions)."""
    stack = list(parsed.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.ClassDef):
            yield node
        elif isinstance(node, (ast.If, ast.Try)):
            stack.extend(node.body + node.orelse + getattr(node, "finalbody", []) +
                         [s for h in getattr(node, "handlers", []) for s in h.body])


def describe_runner(tree, resolver, rel, cls):
    copy_lines = sorted(set(line for _, line, _ in tree.line_hits(b"copy_(", [rel])))
    method = replay_method(cls, copy_lines)
    info = {"class": cls.name, "found": True, "file": rel, "line": cls.lineno,
            "bases": [unparse(b, 80) for b in cls.bases]}
    if method is None:
        info.update(dict(NOT_FOUND, found=True, file=rel, line=cls.lineno),
                    reason="no method copies into static buffers")
        return info
    module = tree.module_of(rel)
    grouped, per_tensor = [], []
    for node, _ in walk_lines(method, copy_lines):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        if name == "copy_" and isinstance(node.func, ast.Attribute):
            per_tensor.append((node, field_name(node.func.value)))
        elif name and "foreach_copy" in name:
            grouped.append(node)
    grouped_fields = []
    evidence = [tree.evidence(rel, method.lineno, role="replay_method")]
    resolved = []
    for call in grouped:
        if call.args:
            grouped_fields.extend(f for f in copied_fields(method, call.args[0], resolver, module)[0]
                                  if f not in grouped_fields)
        target = resolver.resolve_call(module, call, ((cls, "body"), (method, "body"))) \
            if call_name(call) == FUNC else None
        resolved.append({"module": target["module"], "file": target["file"], "line": target["line"]}
                        if target and target.get("file") else None)
        evidence.append(tree.evidence(rel, call.lineno, role="grouped_copy"))
    per_fields = [f for _, f in per_tensor]
    for call, field in per_tensor:
        if field == LARGE_FIELD:
            evidence.append(tree.evidence(rel, call.lineno, role="hidden_states_copy"))
    info.update(
        replay_method=method.name, replay_line=method.lineno, batched=bool(grouped),
        grouped_calls=len(grouped), grouped_fields=grouped_fields, grouped_resolves_to=resolved,
        per_tensor_copies=len(per_tensor), per_tensor_fields=per_fields,
        hidden_states_separate=bool(grouped) and LARGE_FIELD in per_fields and LARGE_FIELD not in grouped_fields,
        evidence=evidence)
    return info


def replay_method(cls, copy_lines):
    """The method that fills the static buffers from a batch: most copies that read its batch argument.

    Only the lines holding `copy_(` (found by a byte search) are walked.
    """
    best, best_score = None, 0
    for node in cls.body:
        if not isinstance(node, FUNCS) or node.name == "__init__":
            continue
        params = {a.arg for a in node.args.args[1:] + node.args.kwonlyargs}
        score = 0
        for call, _ in walk_lines(node, copy_lines):
            if not isinstance(call, ast.Call):
                continue
            name = call_name(call) or ""
            if "foreach_copy" in name:
                score += 10
            elif name == "copy_" and _reads(call, params):
                score += 1
        if score > best_score or (score == best_score and score and "replay" in node.name):
            best, best_score = node, score
    return best


def _reads(call, params):
    return any(isinstance(n, ast.Name) and n.id in params for a in call.args for n in ast.walk(a))
