"""JSON in and out of gpudiag: files read with errors that name the file (and line), host documents
decoded within bounds, and documents written so that any JSON parser reads them (no NaN or Infinity)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

MAX_DEPTH = 100  # probe data nests about ten levels; far deeper is a hostile or broken document
# A real host's document holds about 12,000 values and its longest string is a log tail of a few KiB:
# the limits leave wide room and bound what a document may cost once parsed (about 100 bytes a value).
MAX_VALUES = 1_000_000
MAX_STRING_CHARS = 8 * 2**20
_STRING = re.compile('"[^"]{0,%d}"' % MAX_STRING_CHARS)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_AS_SQUARE = str.maketrans("{}", "[]")


class DocumentError(ValueError):
    """A document gpudiag will not read: not JSON, nested too deep, or a number out of range."""


def read_json(path: Path, error: type[Exception] = ValueError) -> Any:
    """The parsed document; `error` carries "PATH: cannot read: …" or "PATH:LINE: not valid JSON: …"."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:  # an int of 5000 digits, nesting past the recursion limit
        raise error(f"{path}: not readable JSON: {type(exc).__name__}: {str(exc)[:120]}") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DocumentError(f"number {text[:40]} is out of range")
    return value


def _no_value(name: str) -> Any:
    """NaN, Infinity, -Infinity (Python's json writes them by default): read as null, a number unknown."""
    return None


def decode_document(text: str) -> Any:
    """JSON from a host, within bounds: NaN/Infinity read as null; a number that overflows, an int too long
    to convert, more than MAX_VALUES values, a string over MAX_STRING_CHARS or more than MAX_DEPTH levels
    of nesting raise DocumentError with a one-line reason naming the limit."""
    check_budget(text)
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_value)
    except DocumentError:
        raise
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: {exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # Python refuses to convert ints over 4300 digits
        raise DocumentError(f"a number is out of range ({str(exc)[:80]})") from None


def check_budget(text: str) -> None:
    """Refuse a document over a limit before any of it is built.

    A bounded tokenizer in a few C-speed passes over the text (no Python loop per token, no tree): escapes
    are dropped so that quotes pair up, each string is replaced by one character (a string over the limit
    is left unpaired), the structural characters left are counted, and nesting is peeled one level a pass.
    It costs at most one copy of the text (none when nothing in it is escaped or quoted), freed before
    `json.loads` runs."""
    unescaped = text.replace("\\\\", "").replace('\\"', "")  # the same object when nothing is escaped
    if unescaped.count('"') % 2:
        raise DocumentError("not valid JSON: a string is never closed")
    stripped = _STRING.sub("S", unescaped)
    del unescaped
    if '"' in stripped:
        raise DocumentError(f"a string is longer than {MAX_STRING_CHARS // 2**20} Mi characters (the limit)")
    values = sum(stripped.count(char) for char in ",:[{") + 1
    if values > MAX_VALUES:
        raise DocumentError(f"more than {MAX_VALUES:,} values (the limit)")
    # Within MAX_VALUES the brackets are at most 2 * MAX_VALUES characters: peeling them is cheap.
    brackets = _NOT_BRACKET.sub("", stripped).translate(_AS_SQUARE)
    del stripped
    for _ in range(MAX_DEPTH):
        peeled = brackets.replace("[]", "")  # non-overlapping: exactly one level of every chain a pass
        if len(peeled) == len(brackets):
            return  # nothing left, or brackets that do not pair: json.loads names that error
        brackets = peeled
    if brackets:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")


def finite(doc: Any) -> Any:
    """The document with NaN and ±Infinity replaced by null: strict parsers reject them."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {key: finite(value) for key, value in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite(value) for value in doc]
    return doc


def dumps_strict(doc: Any, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN or Infinity (they become null)."""
    return json.dumps(finite(doc), allow_nan=False, **kwargs)
