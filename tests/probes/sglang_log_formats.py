"""Decode and prefill lines rendered from a real sglang wheel's own format strings (read as AST, never
imported): the f-strings that build the `Decode batch` / `Prefill batch` message and the logging prefix.

Each value is chosen by the label printed before it, so the test knows what the parser must read back:
#running-req 37, accept len 3.25, accept rate 0.56, cap len 8.5, block accept len 9.25, gen throughput
1234.5, input throughput 567.25, the graph flag False, the forward counter 4242.
"""
from __future__ import annotations

import ast
from pathlib import Path

VALUES = {"#running-req": 37, "accept len": 3.25, "accept rate": 0.56, "cap len": 8.5, "block accept len": 9.25,
          "gen throughput (token/s)": 1234.5, "input throughput (token/s)": 567.25}
FORWARD_CT = 4242


def _statements(node):
    """Every Assign/AugAssign/Call below `node`, in source order."""
    found = [n for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AugAssign, ast.Expr))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _target(stmt):
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return targets[0].id if targets and isinstance(targets[0], ast.Name) else None


def _head_of(value, head):
    return isinstance(value, ast.JoinedStr) and value.values and isinstance(value.values[0], ast.Constant) \
        and str(value.values[0].value).startswith(head)


class Renderer:
    def __init__(self, function, package, values=None):
        self.function, self.package = function, package
        self.values = dict(VALUES, **(values or {}))

    def render(self, joined, token_variant=0):
        out = ""
        for part in joined.values:
            if isinstance(part, ast.Constant):
                out += str(part.value)
            else:
                out += self._value(part, out, token_variant)
        return out

    def _value(self, part, before, token_variant):
        source = ast.unparse(part.value)
        key = before.rsplit(", ", 1)[-1].rsplit(". ", 1)[-1].rstrip(": ").strip()
        if "graph_backend" in source:  # self._graph_backend_label, graph_backend[self.device]
            return "cuda graph"
        if isinstance(part.value, ast.IfExp) and isinstance(part.value.body, ast.Constant):
            return str(part.value.body.value)  # {'cuda graph' if self.device == 'cuda' else 'cpu graph'}
        if "can_run_cuda_graph" in source:
            return str(self.values.get("graph", False))
        if source == "iter_msg":
            return " [%d]" % FORWARD_CT
        if key.startswith("Prefill batch [") or key.startswith("Decode batch ["):
            return str(FORWARD_CT)
        if source.endswith("_msg") and isinstance(part.value, ast.Name):
            variants = self.token_variants(source)
            return variants[token_variant % len(variants)]
        value = self.values.get(key)
        spec = "".join(str(v.value) for v in part.format_spec.values) if part.format_spec else ""
        if value is None:
            value = 0.25 if "f" in spec else 7
        return format(value, spec)

    def token_variants(self, name):
        """The release's token-usage fragments: assigned in the function, or built by the pool observer."""
        texts = [self.render(s.value) for s in _statements(self.function)
                 if _target(s) == name and isinstance(s.value, ast.JoinedStr)]
        return texts or self._pool_parts() or ["#token: 7, token usage: 0.25, "]

    def _pool_parts(self):
        for path in self.package.rglob("pool_stats_observer.py"):
            tree = ast.parse(path.read_text())
            for fn in ast.walk(tree):
                if isinstance(fn, ast.FunctionDef) and fn.name == "get_decode_usage_msg_parts":
                    groups = [[self.render(e) for e in n.elts if isinstance(e, ast.JoinedStr)]
                              for n in ast.walk(fn) if isinstance(n, ast.List)]
                    single = [self.render(n) for n in ast.walk(fn) if isinstance(n, ast.JoinedStr)
                              and self.render(n).startswith("#token")]
                    return [", ".join(g) + ", " for g in groups if g] + [t + ", " for t in single]
        return []


def functions_with(package: Path, head: str, values=None):
    """(function node, renderer) for each function in sglang/srt that builds a `head` message."""
    out = []
    for path in sorted((package / "srt").rglob("*.py")):
        text = path.read_text(errors="replace")
        if head not in text or "debug_utils" in path.parts:
            continue
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _head_of(n, head) for n in ast.walk(fn)):
                out.append((fn, Renderer(fn, package, values)))
    return out


def rendered_lines(package: Path, head: str, values=None):
    """Every message the release can build for `head`: from each head f-string, all appends after it.
    `values` overrides the figures by label ({"accept len": 1.0, "graph": True, ...})."""
    lines = []
    for fn, renderer in functions_with(package, head, values):
        starts = [n for n in ast.walk(fn) if _head_of(n, head)]
        for start in starts:
            name = None
            for stmt in _statements(fn):
                if getattr(stmt, "value", None) is start:
                    name = _target(stmt)
            appends = [s for s in _statements(fn) if name and isinstance(s, ast.AugAssign) and _target(s) == name
                       and isinstance(s.value, ast.JoinedStr) and s.lineno > start.lineno]
            for variant in range(len(renderer.token_variants("token_usage_msg")) if name else 1):
                text = renderer.render(start, variant) + "".join(renderer.render(a.value, variant) for a in appends)
                lines.append(text)
    return lines


def logging_prefix(package: Path):
    """The rank tags the release's scheduler puts in its logging prefix, each with rank 1, in its order."""
    tags = []
    for path in (package / "srt" / "managers").glob("scheduler*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                first = str(node.values[0].value)
                for piece in first.split():
                    if piece in ("DP", "TP", "EP", "PP", "ATTN_CP", "MOE_DP") and piece not in tags:
                        tags.append(piece)
    return " ".join(t + "1" for t in tags)
