"""JSON in and out of gpudiag: files read with errors that name the file (and line), host documents
decoded within bounds, and documents written so that any JSON parser reads them (no NaN or Infinity)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

MAX_DEPTH = 100  # probe data nests about ten levels; far deeper is a hostile or broken document


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
    to convert, or more than MAX_DEPTH levels of nesting raise DocumentError with a one-line reason."""
    try:
        doc = json.loads(text, parse_float=_finite, parse_constant=_no_value)
    except DocumentError:
        raise
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: {exc.msg} at char {exc.pos}") from None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # Python refuses to convert ints over 4300 digits
        raise DocumentError(f"a number is out of range ({str(exc)[:80]})") from None
    if depth(doc) > MAX_DEPTH:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
    return doc


def depth(doc: Any) -> int:
    """How deep lists and objects nest (iterative: the document may be hostile)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


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
