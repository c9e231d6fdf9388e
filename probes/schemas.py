"""The shape of each probe's data, declared once: read by the validator on both sides and by the generator
of docs/probe-data.md. Stdlib only, Python 3.9.

A probe may add keys (readers ignore them) but never rename or retype a declared one. Keys marked optional
may be absent (a branch of the probe that has nothing to say there); every other declared key is present
whenever the probe's status is ok.
"""

NUMBER = "number"
_TYPES = {"str": (str,), "int": (int,), NUMBER: (int, float), "bool": (bool,), "any": None}


class Spec(object):
    """One declared value: a scalar type, an object with named keys, a list, a map, or a choice of values."""

    def __init__(self, kind, doc="", fields=None, item=None, values=None, nullable=False, optional=False):
        self.kind, self.doc, self.fields, self.item, self.values = kind, doc, fields, item, values
        self.nullable, self.optional = nullable, optional
        # The types a non-null value of a scalar spec may have (judged without the walk), else None.
        self.leaf = _TYPES.get(kind) if kind != "any" else None

    def _copy(self, **change):
        spec = Spec(self.kind, self.doc, self.fields, self.item, self.values, self.nullable, self.optional)
        spec.__dict__.update(change)
        return spec

    def null(self, doc=None):
        """The value may be null (unknown, not measured); `doc` says when."""
        return self._copy(nullable=True, doc=doc or self.doc)

    def opt(self, doc=None):
        """The key may be absent; `doc` says when."""
        return self._copy(optional=True, doc=doc or self.doc)

    def type_name(self):
        if self.kind == "obj":
            name = "object"
        elif self.kind == "list":
            name = "list of %s" % self.item.type_name()
        elif self.kind == "map":
            name = "map of %s" % self.item.type_name()
        elif self.kind == "enum":
            name = "|".join(str(v) for v in self.values)
        else:
            name = self.kind
        return name + (" or null" if self.nullable else "")


def s(doc=""):
    return Spec("str", doc)


def i(doc=""):
    return Spec("int", doc)


def num(doc=""):
    return Spec(NUMBER, doc)


def b(doc=""):
    return Spec("bool", doc)


def anything(doc=""):
    return Spec("any", doc)


def obj(fields, doc=""):
    return Spec("obj", doc, fields=fields)


def lst(item, doc=""):
    return Spec("list", doc, item=item)


def mapping(item, doc=""):
    """An object whose keys are data (device names, dtype pairs, paths), each value shaped as `item`."""
    return Spec("map", doc, item=item)


def enum(values, doc=""):
    return Spec("enum", doc, values=tuple(values))


def _describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool %s" % str(value).lower()
    if isinstance(value, (int, float)):
        return "%s %r" % (type(value).__name__, value)
    if isinstance(value, str):
        return "str %r" % (value[:40],)
    return type(value).__name__


def check(spec, value, where):
    """The first mismatch between `value` and `spec` as one line naming the field, or None. The field path is
    built only on the way out of a mismatch, so data that fits (every stored host, read again with each run)
    costs no string per value."""
    found = _misfit(spec, value)
    if found is None:
        return None
    steps, what = found
    return where + "".join(reversed(steps)) + what


def fits(spec, value):
    """Whether check(spec, value, ...) finds nothing."""
    return _misfit(spec, value) is None


def _expected(spec, value):
    return [], ": expected %s, got %s" % (spec.type_name(), _describe(value))


def _misfit(spec, value):
    """None when `value` fits `spec`, else ([path steps, innermost first], ": what is wrong")."""
    if value is None:
        return None if spec.nullable or spec.kind == "any" else _expected(spec, value)
    kind = spec.kind
    if kind == "enum":
        return None if value in spec.values else _expected(spec, value)
    if kind == "obj":
        if not isinstance(value, dict):
            return _expected(spec, value)
        for key, field in spec.fields.items():
            if key not in value:
                if field.optional:
                    continue
                return [], ".%s: missing" % key
            found = _item_misfit(field, value[key])
            if found is not None:
                found[0].append(".%s" % key)
                return found
        return None
    if kind in ("list", "map"):
        if not isinstance(value, list if kind == "list" else dict):
            return _expected(spec, value)
        item = spec.item
        for key, entry in (enumerate(value) if kind == "list" else value.items()):
            found = _item_misfit(item, entry)
            if found is not None:
                found[0].append("[%d]" % key if kind == "list" else ".%s" % key)
                return found
        return None
    types = _TYPES[kind]
    if types is None or (isinstance(value, types) and (bool in types or not isinstance(value, bool))):
        return None
    return _expected(spec, value)


def _item_misfit(spec, value):
    """_misfit, with a non-null scalar (the bulk of a host's data: timings, samples) judged without the walk."""
    leaf = spec.leaf
    if leaf is not None and value is not None and isinstance(value, leaf) and (bool in leaf or type(value) is not bool):
        return None
    return _misfit(spec, value)


def rows(spec, where):
    """(field path, type, optional, meaning) for every declared key under `spec`, depth first."""
    out = []
    if spec.kind == "obj":
        for key, field in spec.fields.items():
            path = "%s.%s" % (where, key) if where else key
            out.append((path, field.type_name() if field.kind not in ("obj",) else "object"
                        + (" or null" if field.nullable else ""), field.optional, field.doc))
            out.extend(rows(field, path))
    elif spec.kind in ("list", "map"):
        out.extend(rows(spec.item, where + ("[]" if spec.kind == "list" else ".<key>")))
    return out


def markdown(shapes, notes, intro):
    """docs/probe-data.md: per probe its meaning, one row per declared key, then its notes."""
    lines = ["# Probe data shapes", "", "<!-- Generated from each probe's SHAPE and NOTES by scripts/generated-docs.py;"
             " edit the declarations, then rerun the script. -->", "", intro, ""]
    for name, spec in shapes.items():
        lines += ["## %s" % name, "", spec.doc + ".", "", "| key | type | meaning |", "|---|---|---|"]
        for path, type_name, optional, doc in rows(spec, ""):
            key = "`%s`%s" % (path, " (optional)" if optional else "")
            lines.append("| %s | %s | %s |" % (key, type_name.replace("|", "\\|"), doc.replace("|", "\\|")))
        if notes.get(name):
            lines += ["", notes[name].strip()]
        lines.append("")
    return "\n".join(lines)


def example(spec):
    """The plainest value that fits `spec`: null where allowed, else empty, zero, false or the first choice."""
    if spec.nullable:
        return None
    if spec.kind == "obj":
        return dict((key, example(field)) for key, field in spec.fields.items() if not field.optional)
    return {"list": [], "map": {}, "str": "", "int": 0, NUMBER: 0, "bool": False, "any": None,
            "enum": (spec.values or (None,))[0]}[spec.kind]


def complete(spec, partial):
    """`partial` with every declared key it lacks filled by example(): hand-written data made to fit."""
    if spec.kind == "obj" and isinstance(partial, dict):
        out = dict(partial)
        for key, field in spec.fields.items():
            if key in out:
                out[key] = complete(field, out[key])
            elif not field.optional:
                out[key] = example(field)
        return out
    if spec.kind in ("list", "map") and isinstance(partial, (list, dict)):
        items = partial.items() if isinstance(partial, dict) else enumerate(partial)
        done = [(k, complete(spec.item, v)) for k, v in items]
        return dict(done) if isinstance(partial, dict) else [v for _, v in done]
    return partial
