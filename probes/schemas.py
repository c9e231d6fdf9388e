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
        # The types a non-null value of a scalar spec may have (fits() checks those inline), else None.
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
    """The first mismatch between `value` and `spec` as one line naming the field, or None."""
    if value is None:
        return None if spec.nullable or spec.kind == "any" else "%s: expected %s, got null" % (where, spec.type_name())
    if spec.kind == "enum":
        return None if value in spec.values else "%s: expected %s, got %s" % (where, spec.type_name(),
                                                                              _describe(value))
    if spec.kind in ("obj", "map"):
        if not isinstance(value, dict):
            return "%s: expected %s, got %s" % (where, spec.type_name(), _describe(value))
        if spec.kind == "map":
            for key, item in value.items():
                found = check(spec.item, item, "%s.%s" % (where, key))
                if found:
                    return found
            return None
        for key, field in spec.fields.items():
            if key not in value:
                if field.optional:
                    continue
                return "%s.%s: missing" % (where, key)
            found = check(field, value[key], "%s.%s" % (where, key))
            if found:
                return found
        return None
    if spec.kind == "list":
        if not isinstance(value, list):
            return "%s: expected %s, got %s" % (where, spec.type_name(), _describe(value))
        for index, item in enumerate(value):
            found = check(spec.item, item, "%s[%d]" % (where, index))
            if found:
                return found
        return None
    types = _TYPES[spec.kind]
    if types is None:
        return None
    if isinstance(value, bool) and bool not in types:
        return "%s: expected %s, got %s" % (where, spec.type_name(), _describe(value))
    if not isinstance(value, types):
        return "%s: expected %s, got %s" % (where, spec.type_name(), _describe(value))
    return None


def fits(spec, value):
    """Whether check(spec, value, ...) finds nothing: the same walk without a field path made per value, for
    data that nearly always fits (every stored host is checked again when a run is read)."""
    if value is None:
        return spec.nullable or spec.kind == "any"
    kind = spec.kind
    if kind == "enum":
        return value in spec.values
    if kind == "obj":
        if not isinstance(value, dict):
            return False
        for key, field in spec.fields.items():
            if key not in value:
                if field.optional:
                    continue
                return False
            item, leaf = value[key], field.leaf
            if leaf is None or item is None:
                if not fits(field, item):
                    return False
            elif not isinstance(item, leaf) or (type(item) is bool and bool not in leaf):
                return False
        return True
    if kind in ("list", "map"):
        if not isinstance(value, list if kind == "list" else dict):
            return False
        items = value if kind == "list" else value.values()
        item, leaf = spec.item, spec.item.leaf
        if leaf is None or item.nullable:  # containers, choices, nulls: the whole walk
            return all(fits(item, v) for v in items)
        # Scalars, the bulk of a host's data (timings, samples): checked here, without a call per item.
        return all(isinstance(v, leaf) and not (type(v) is bool and bool not in leaf) for v in items)
    types = _TYPES[kind]
    if types is None:
        return True
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


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
