"""Server flags for CUDA graphs and speculative decoding: `add_argument` calls and ServerArgs fields.

Older releases register every flag by hand next to a ServerArgs dataclass; newer ones generate
flags from annotated fields of namespace classes (marked by `_NS_PATH`) and keep only deprecated
spellings as `add_argument` calls.
"""
import ast
import re

from probes.sglang_facts.astutil import call_name, string_value, unparse

# Graph and speculative flags, plus every other flag the sglang-mode repro passes (so each launch can be
# checked against the release's own parser).
DEFAULT_PATTERN = (r"cuda[-_]?graph|cudagraph|graph|speculative|spec[-_]|draft|eagle|dflash|breakable|piecewise|"
                   r"^(--)?(model[-_]path|load[-_]format|host|port|tp[-_]size|tensor[-_]parallel[-_]size|"
                   r"mem[-_]fraction[-_]static|skip[-_]tokenizer[-_]init|json[-_]model[-_]override[-_]args)$")
CLASS_LINE = re.compile(r"^class[ \t]+(\w+)")
FIELD_LINE = re.compile(r"^([ \t]+)(\w+)[ \t]*:(?!=)")
NS_MARK = re.compile(r"^[ \t]+_NS_PATH[ \t]*(:[^=]*)?=")
USE_INSTEAD = re.compile(r"[Uu]se\s+[`'\"]?(--[\w{},<>=-]+)")


def find_server_flags(tree, pattern=None):
    wanted = re.compile(pattern or DEFAULT_PATTERN, re.I)
    classes = [(tree.module_of(rel), rel, line) for rel, line, text in
               tree.line_hits(b"class ServerArgs", tree.containing(b"class ServerArgs")) if CLASS_LINE.match(text)]
    if not classes:
        return {"server_args": None, "server_flags": [], "server_fields": []}
    # Several packages ship a ServerArgs (the diffusion server has its own): the shallowest is the LLM server's.
    module, rel, line = sorted(classes, key=lambda c: (c[0].count("."), c[0]))[0]
    package = module.rsplit(".", 1)[0]
    flags = [f for f in add_argument_flags(tree, rel) if wanted.search(f["name"])]
    fields = list(class_fields(tree, rel, "ServerArgs", wanted))
    prefix = package.replace(".", "/") + "/"
    subtree = [r for r in tree.files if r.startswith(prefix)]
    for ns_rel in [r for r in subtree if b"_NS_PATH" in tree.read(r)]:
        for cls in namespace_classes(tree, ns_rel):
            fields.extend(class_fields(tree, ns_rel, cls, wanted))
    known = {f["name"] for f in flags}
    for field in fields:
        for flag in field.pop("_flags", []):
            if flag["name"] not in known:
                known.add(flag["name"])
                flags.append(flag)
    return {"server_args": {"module": module, "file": rel, "line": line, "all_classes": [c[0] for c in classes]},
            "server_flags": flags, "server_fields": fields}


_REGIONS = {}


def class_regions(tree, rel):
    """{class name: (first line, last line)} for the top-level classes of a file, from its text."""
    key = (id(tree), rel)
    held = _REGIONS.get(key)
    # The tree is kept beside its regions: a freed tree's id may be reused by the next one (another release's
    # file of the same name), and its regions must never be read for it.
    if held is None or held[0] is not tree:
        if not any(t is tree for t, _ in _REGIONS.values()):
            _REGIONS.clear()  # one tree at a time: nothing outlives a scan for long
        held = _REGIONS[key] = (tree, _class_regions(tree.lines(rel)))
    return held[1]


def _class_regions(lines):
    regions, current = {}, None
    for number, text in enumerate(lines, 1):
        if text[:1].strip() and not text.startswith((")", "]", "}", "#")):
            match = CLASS_LINE.match(text)
            if current:
                regions[current[0]] = (current[1], number - 1)
            current = (match.group(1), number) if match else None
    if current:
        regions[current[0]] = (current[1], len(lines))
    return regions


def namespace_classes(tree, rel):
    """Classes holding a `_NS_PATH` marker: the sources of generated flags."""
    regions = class_regions(tree, rel)
    marks = [line for _, line, text in tree.line_hits(b"_NS_PATH", [rel]) if NS_MARK.match(text)]
    return [name for name, (first, last) in regions.items() if any(first <= m <= last for m in marks)]


def add_argument_flags(tree, rel):
    parsed = tree.tree(rel)
    flags = []
    for node in ast.walk(parsed) if parsed is not None else ():
        if not (isinstance(node, ast.Call) and call_name(node) == "add_argument"):
            continue
        names = [string_value(a) for a in node.args]
        names = [n for n in names if n and n.startswith("--")]
        if not names:
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = unparse(keywords["action"], 80) if "action" in keywords else None
        help_text = string_value(keywords["help"]) if "help" in keywords else ""
        deprecated = bool(action and "eprecat" in action) or "deprecated" in (help_text or "")[:40].lower()
        alias_of = None
        if "new_flag" in keywords:
            alias_of = string_value(keywords["new_flag"])
        elif deprecated and help_text and USE_INSTEAD.search(help_text):
            alias_of = USE_INSTEAD.search(help_text).group(1)
        dest = string_value(keywords["dest"]) if "dest" in keywords else names[0][2:].replace("-", "_")
        choices = literal_choices(tree, rel, keywords.get("choices"))
        for name in names:
            flags.append(tree.evidence(rel, node.lineno, name=name, dest=dest, via="add_argument", action=action,
                                       deprecated=deprecated, alias_of=alias_of, choices=choices))
    return flags


def literal_choices(tree, rel, expr, hops=2):
    """The strings a `choices=` accepts: a literal list, or a module constant (here or imported), else None."""
    if expr is None:
        return None
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        values = [string_value(e) for e in expr.elts]
        return values if values and all(v is not None for v in values) else None
    if not isinstance(expr, ast.Name) or hops <= 0:
        return None
    parsed = tree.tree(rel)
    for node in parsed.body if parsed is not None else ():
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets):
            return literal_choices(tree, rel, node.value, hops - 1)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                any((a.asname or a.name) == expr.id for a in node.names):
            source = tree.file_of(node.module)
            name = [a.name for a in node.names if (a.asname or a.name) == expr.id][0]
            return literal_choices(tree, source, ast.Name(id=name), hops - 1) if source else None
    return None


def class_fields(tree, rel, cls_name, wanted):
    """Annotated fields of a class whose names match; each statement is parsed alone.

    Fields carrying Annotated metadata generate CLI flags (`--name`, `Arg(cli_name=..., aliases=...)`).
    """
    region = class_regions(tree, rel).get(cls_name)
    if not region:
        return []
    lines = tree.lines(rel)
    # The body's indentation is that of its first line (a docstring may show indented examples).
    first = next((t for t in lines[region[0]:region[1]] if t.strip()), "")
    body_indent = len(first) - len(first.lstrip())
    fields = []
    for number in range(region[0] + 1, region[1] + 1):
        text = lines[number - 1]
        match = FIELD_LINE.match(text)
        if not match:
            continue
        if len(match.group(1)) != body_indent or not wanted.search(match.group(2)):
            continue
        stmt = tree.statement_at(rel, number)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            fields.append(describe_field(tree, rel, cls_name, stmt))
    return fields


def describe_field(tree, rel, cls_name, stmt):
    name = stmt.target.id
    meta = _annotated_metadata(stmt.annotation)
    arg = next((m for m in meta if isinstance(m, ast.Call) and call_name(m) == "Arg"), None)
    keywords = {k.arg: k.value for k in arg.keywords if k.arg} if arg is not None else {}
    help_text = next((string_value(m) for m in meta if string_value(m)), None) or \
        (string_value(keywords["help"]) if "help" in keywords else None) or ""
    no_cli = "no_cli" in keywords and unparse(keywords["no_cli"]) == "True"
    field = tree.evidence(rel, stmt.lineno, name=name, **{"class": cls_name})
    field["generates_flag"] = bool(meta) and not no_cli
    field["deprecated"] = "deprecated" in help_text[:40].lower()
    if field["generates_flag"]:
        choices = literal_choices(tree, rel, keywords.get("choices")) or _literal_type(stmt.annotation)
        main = string_value(keywords["cli_name"]) if "cli_name" in keywords else None
        main = main or "--" + name.replace("_", "-")
        aliases = [string_value(e) for e in getattr(keywords.get("aliases"), "elts", [])]
        field["_flags"] = [tree.evidence(rel, stmt.lineno, name=main, dest=name, via="field",
                                         deprecated=field["deprecated"], alias_of=None, choices=choices)]
        field["_flags"] += [tree.evidence(rel, stmt.lineno, name=a, dest=name, via="field_alias",
                                          deprecated=False, alias_of=main, choices=choices) for a in aliases if a]
    return field


def _literal_type(annotation):
    """`A[Literal["a", "b"], ...]` (also inside Optional[...]) -> ["a", "b"]; anything else -> None."""
    for node in ast.walk(annotation) if isinstance(annotation, ast.Subscript) else ():
        if isinstance(node, ast.Subscript) and unparse(node.value).rsplit(".", 1)[-1] == "Literal":
            inner = node.slice
            if hasattr(ast, "Index") and isinstance(inner, ast.Index):
                inner = inner.value
            elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            values = [string_value(e) for e in elements]
            return values if all(v is not None for v in values) else None
    return None


def _annotated_metadata(annotation):
    """`A[T, meta...]` / `Annotated[T, meta...]` -> [meta...]; anything else -> []."""
    if not isinstance(annotation, ast.Subscript):
        return []
    base = unparse(annotation.value)
    if base.rsplit(".", 1)[-1] not in ("A", "Annotated"):
        return []
    inner = annotation.slice
    if hasattr(ast, "Index") and isinstance(inner, ast.Index):
        inner = inner.value  # Python 3.8 wraps subscripts
    return list(inner.elts[1:]) if isinstance(inner, ast.Tuple) else []
