"""JSON in and out of gpudiag: files read with errors that name the file (and line), host documents
decoded within bounds, and documents written so that any JSON parser reads them (no NaN or Infinity)."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterator

MAX_DEPTH = 100  # probe data nests about ten levels; far deeper is a hostile or broken document
# A real host's document holds about 12,000 values and its longest string is a log tail of a few KiB:
# the limits leave wide room and bound what a document may cost once parsed (about 100 bytes a value).
MAX_VALUES = 1_000_000
MAX_STRING_CHARS = 8 * 2**20
# What the values would cost once built, estimated per token (CPython, 64-bit), may not pass this many bytes
# per byte of text, nor MIN_DECODED_BYTES for a small document: a dense frame of tiny objects (`{}` is 3 bytes of
# text and ~72 bytes built) is refused before it is built. Real host documents build to 1.7-3.7x their bytes
# (estimated at 3-6x) and stay under the floor; with the frame's own bytes and text, an accepted frame past the
# floor costs well under 5x its size (at 2.5, strings estimated just under it cost 5.05x at one host).
DECODED_PER_BYTE = 2.0
MIN_DECODED_BYTES = 8 * 2**20
_COST = {"{": 64, "[": 64, ":": 40, ",": 8}  # a container's header; a dict entry; a reference to an element
_STRING_COST = 50  # a str object's header; its characters count with the text's length
_NUMBER_COST = 24  # a float (ints of this size or more; small ones are shared)
_NUMBER = re.compile(r"-?[0-9][0-9.eE+-]*")
# The tokenizer's working copies: 2 Mi characters, under MAX_STRING_CHARS. Copies of 4 Mi characters outlived the
# check in the allocator's heap (held, not returned) while the frame was built: about 0.5x its size more.
CHUNK_CHARS = 2**21
_STRING = re.compile('"[^"]*"')
_NOT_BACKSLASH = re.compile(r"[^\\]")
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


# json's own C scanner, a string and a value at a time (typeshed does not declare them).
_SCAN_STRING: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_SCAN_VALUE: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, at: int) -> int:
    found = _WHITESPACE.match(text, at)
    return found.end() if found else at


def object_with_spans(text: str) -> tuple[dict[str, Any], dict[str, tuple[int, int]]] | None:
    """(the JSON object `text` holds, {key: (start, end) of its value's text}), decoded once by json's own
    scanner, or None when `text` is not one JSON object (json.loads then names the error). The spans let a
    caller key a value by its text without encoding it again."""
    doc: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    try:
        at = _skip(text, 0)
        if text[at] != "{":
            return None
        at = _skip(text, at + 1)
        while text[at] != "}":
            if text[at] != '"':
                return None
            key, at = _SCAN_STRING(text, at + 1)
            at = _skip(text, at)
            if text[at] != ":":
                return None
            at = _skip(text, at + 1)
            doc[key], end = _SCAN_VALUE(text, at)
            spans[key] = (at, end)
            at = _skip(text, end)
            if text[at] == ",":
                at = _skip(text, at + 1)
                if text[at] == "}":
                    return None  # a trailing comma
            elif text[at] != "}":
                return None
    except (StopIteration, IndexError, ValueError, RecursionError):
        return None
    return (doc, spans) if _skip(text, at + 1) == len(text) else None


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

    Also refused: a document whose values would cost more than decoded_budget(len(text)) bytes once built.

    A bounded tokenizer: the text is read in chunks of CHUNK_CHARS with C-speed string operations (no Python
    loop per token, no tree). Escapes are dropped so that quotes pair up, each string is replaced by one
    character, the structural characters left are counted, and the brackets kept are peeled one nesting
    level a pass at the end. Its working copies are a chunk or two, whatever the document's size, and a
    document over the value limit is refused at the chunk that passes it."""
    scan = _BudgetScan(decoded_budget(len(text)))
    start = 0
    while start < len(text):
        end = min(start + CHUNK_CHARS, len(text))
        if text[end - 1] == "\\":  # never cut an escape: a run of backslashes and the character after it
            after = _NOT_BACKSLASH.search(text, end)
            end = after.start() + 1 if after else len(text)
        scan.feed(text[start:end])
        start = end
    scan.finish()


def decoded_budget(chars: int) -> int:
    """The bytes a document of `chars` characters may cost once decoded."""
    return max(MIN_DECODED_BYTES, int(DECODED_PER_BYTE * chars))


class _BudgetScan:
    def __init__(self, decoded_budget: int) -> None:
        self.decoded_budget = decoded_budget
        self.decoded = 0  # the estimate so far: objects built and the characters of their strings
        self.values = 1
        self.brackets: list[str] = []
        self.bracket_chars = 0
        self.open_string: int | None = None  # characters so far of a string a chunk left open

    def feed(self, chunk: str) -> None:
        chars = len(chunk)
        chunk = chunk.replace("\\\\", "").replace('\\"', "")  # the same object when nothing is escaped
        if self.open_string is not None:
            close = chunk.find('"')
            self._grow(len(chunk) if close < 0 else close)
            if close < 0:
                return
            self.open_string, chunk = None, chunk[close + 1 :]
        if chunk.count('"') % 2:  # the chunk ends inside a string
            last = chunk.rfind('"')
            self.open_string = 0
            self._grow(len(chunk) - last - 1)
            chunk = chunk[:last]
        stripped = _STRING.sub("S", chunk)  # a string within one chunk is shorter than the limit
        del chunk
        counts = {char: stripped.count(char) for char in ",:[{"}
        self.values += sum(counts.values())
        if self.values > MAX_VALUES:
            raise DocumentError(f"more than {MAX_VALUES:,} values (the limit)")
        self._cost(chars, counts, stripped)
        brackets = _NOT_BRACKET.sub("", stripped).translate(_AS_SQUARE)
        self.bracket_chars += len(brackets)
        if self.bracket_chars > 2 * MAX_VALUES:  # opening ones are values: these are closing ones
            raise DocumentError("not valid JSON: brackets do not pair")
        self.brackets.append(brackets)

    def _cost(self, chars: int, counts: dict[str, int], stripped: str) -> None:
        """Add a chunk's estimated cost: containers, entries and references by their tokens, a string object
        per string that is not a key (keys repeat and are shared), a number object per number, and the
        chunk's characters for the strings' contents."""
        strings = max(0, stripped.count("S") - counts[":"])
        numbers = _NUMBER.subn("", stripped)[1]
        self.decoded += chars + sum(_COST[c] * n for c, n in counts.items())
        self.decoded += _STRING_COST * strings + _NUMBER_COST * numbers
        if self.decoded > self.decoded_budget:
            raise DocumentError(
                f"its values would take more than {self.decoded_budget // 2**20} MiB once decoded "
                f"(the limit: {DECODED_PER_BYTE}x the document's size, at least {MIN_DECODED_BYTES // 2**20} MiB)"
            )

    def _grow(self, chars: int) -> None:
        self.open_string = (self.open_string or 0) + chars
        if self.open_string > MAX_STRING_CHARS:
            raise DocumentError(f"a string is longer than {MAX_STRING_CHARS // 2**20} Mi characters (the limit)")

    def finish(self) -> None:
        if self.open_string is not None:
            raise DocumentError("not valid JSON: a string is never closed")
        brackets = "".join(self.brackets)
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


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Reading hosts builds millions of containers and no reference cycles (JSON trees): the cyclic collector,
    left on, walks the growing heap again and again and finds nothing (near half the read at 2,000 hosts).
    A command that reads a whole run and renders it once (report, scan's findings) holds it paused throughout."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
