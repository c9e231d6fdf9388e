"""How a probe declares its options (`--set PROBE.KEY=VALUE`) and how a value is checked against one.

Standard library only: the control side checks `--set` with these declarations before it connects, and
the probe reads its defaults from the same ones on the host.
"""

# Kinds of value an option takes; `check` turns what the command line gave into that kind or says why not.
KINDS = ("int", "float", "bool", "str", "regex", "choice", "int_list", "choice_list", "path")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class OptionValueError(ValueError):
    """A value an option cannot take; the message names the option and what it accepts."""


class Option(object):
    """One option of one probe: name, kind, default, one-line help; optional bounds and allowed values."""

    def __init__(self, name, kind, default, help, choices=None, minimum=None, nullable=False, length=None):
        assert kind in KINDS, kind
        self.name, self.kind, self.default, self.help = name, kind, default, help
        self.choices = tuple(choices) if choices else None
        self.minimum = minimum
        self.nullable = nullable    # None is a real value ("not set": the probe decides)
        self.length = length        # a list of exactly this many items

    def accepts(self):
        """What the option accepts, in words (for errors, `gpudiag probes` and the docs)."""
        bound = " ≥ %s" % self.minimum if self.minimum is not None else ""
        text = {"int": "an integer%s" % bound, "float": "a number%s" % bound, "bool": "true or false",
                "str": "text", "path": "a path on the host", "regex": "a Python regular expression",
                "choice": "one of %s" % ", ".join(self.choices or ()),
                "int_list": ("a list of %d integers%s" % (self.length, bound) if self.length
                             else "a list of integers%s, e.g. [1,8]" % bound),
                "choice_list": "a list of %s" % ", ".join(self.choices or ())}[self.kind]
        return text + (", or null" if self.nullable else "")

    def check(self, value, owner=""):
        """The value as this option's kind, or OptionValueError naming `owner.name` and what it accepts."""
        if value is None and self.nullable:
            return None
        try:
            return _CHECKS[self.kind](self, value)
        except (TypeError, ValueError, OverflowError):
            raise OptionValueError("%s%s: expected %s, got %r" % (owner + "." if owner else "", self.name,
                                                                  self.accepts(), value)) from None


def _int(option, value):
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    number = int(value)
    if option.minimum is not None and number < option.minimum:
        raise ValueError(value)
    return number


def _float(option, value):
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(value)
    if option.minimum is not None and number < option.minimum:
        raise ValueError(value)
    return number


def _bool(option, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError(value)


def _text(option, value):
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or value == "":
        raise ValueError(value)
    return str(value)


def _regex(option, value):
    import re
    text = _text(option, value)
    try:
        re.compile(text)
    except re.error:
        raise ValueError(text) from None
    return text


def _choice(option, value):
    if isinstance(value, bool):    # JSON true/false for a choice spelled "true"/"false"
        value = "true" if value else "false"
    # Case does not matter (`dflash` is DFLASH); the declared spelling is what the probe gets.
    for choice in option.choices or ():
        if str(value).lower() == choice.lower():
            return choice
    raise ValueError(value)


def _items(value):
    """A list from a JSON list, one scalar, or "a,b" text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    elif isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(value)
    return list(value)


def _int_list(option, value):
    numbers = [_int(option, v) for v in _items(value)]
    if option.length is not None and len(numbers) != option.length:
        raise ValueError(value)
    return numbers


def _choice_list(option, value):
    return [_choice(option, v) for v in _items(value)]


_CHECKS = {"int": _int, "float": _float, "bool": _bool, "str": _text, "regex": _regex, "path": _text, "choice": _choice,
           "int_list": _int_list, "choice_list": _choice_list}


def defaults(options):
    """{name: default} of a declaration."""
    return dict((o.name, o.default) for o in options)


def settings(options, given):
    """A probe's settings: each declared option's given value, or its declared default where none was given
    (so a default is stated once, in the declaration). Undeclared keys given are kept as they are."""
    out = dict(given) if isinstance(given, dict) else {}
    for option in options:
        if out.get(option.name) is None:
            out[option.name] = option.default
    return out
