"""Host strings are data: one place that makes any host-provided value safe to show.

`clean_run` bounds a whole run before rules and renderers read it (controls and escapes gone, invisible
format characters such as bidi overrides and zero-width spaces shown escaped, strings capped, nesting cut); `console` and `md` make one value safe for a terminal or for markdown.
Every step looks at a bounded prefix of its input, so time and output stay linear and bounded.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import weakref
from typing import Any, Iterable

from gpudiag.derived import is_slim
from gpudiag.models import HostResult, ProbeResult
from gpudiag.run_records import LoadedRun

MAX_CHARS = 512  # a host string longer than this is cut, saying how long it was
MAX_DEPTH = 24  # deeper probe data is replaced by a note (no renderer needs more than ~8)
MAX_ITEMS = 4096  # list items / object keys kept per container

# ESC-introduced sequences (CSI, OSC with BEL or ST end, two-byte escapes), then any single control left.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
# C0 except tab/newline, DEL, C1, line/paragraph separators: removed.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# Invisible format characters (Unicode category Cf: zero-width spaces and joiners, bidi marks, embeddings,
# overrides and isolates, BOM, tags): shown escaped (`\u200b`), not removed, so that a look-alike host name
# or version stays visibly different from the one it imitates. Unicode 15.1's Cf set; a test holds it
# against the running Python's unicodedata.
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
# Backslash first (so host text cannot undo an escape), code spans, HTML, table cells; `](`, `][` and `![`
# are the only ways a link or image can open inside one line.
_CAPPED = re.compile(r"… \(\d+ bytes\)")
_MD_SPECIAL = re.compile(r"([\\`<|])")
_MD_SPECIAL_KEEP_CODE = re.compile(r"([\\<|])")
_MD_LINK = re.compile(r"\]([(\[])|!\[")
# Anything the escapes below would change (a backtick too where code spans are kept: the full pass decides).
_MD_ANY = re.compile(r"[\\`<|]|\][(\[]|!\[|://|www\.")
_MD_LINE_START = re.compile(r"^(\s*)([#>=~]|[-+*](?=\s)|\d+[.)](?=\s))")


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception as exc:  # noqa: BLE001 - a value that cannot be shown is shown as such
        return f"<unreadable {type(value).__name__}: {type(exc).__name__}>"


def _escaped(match: re.Match[str]) -> str:
    point = ord(match.group(0))
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def clean(value: Any, limit: int = MAX_CHARS, keep_newlines: bool = False) -> str:
    """Controls and escape sequences removed, invisible format characters (bidi overrides, zero-width
    characters) shown escaped; cut at `limit` characters + "… (N bytes)"."""
    text = _text_of(value)
    if len(text) <= limit and text.isprintable():
        return text  # no control, escape, bidi override, tab or newline, and short: nothing to remove or cut
    head = text[: limit * 4 + 64]  # escapes removed below never shrink more than this allows for
    head = _FORMAT.sub(_escaped, _CONTROLS.sub("", _ESCAPES.sub("", head)))
    head = head.replace("\t", " ")
    if not keep_newlines:
        head = head.replace("\r", "").replace("\n", " ")
    if _CAPPED.search(head) and len(text) <= limit * 4 + 64:
        return head  # built from values cut once already (with their true size): bounded, not cut again
    if len(head) > limit or len(text) > limit * 4 + 64:
        size = len(text.encode("utf-8", "replace"))
        return head[:limit] + f"… ({size} bytes)"
    return head


def console(value: Any, limit: int = MAX_CHARS) -> str:
    """A host value for the terminal: one line, clean, capped."""
    return clean(value, limit)


def md(value: Any, limit: int = MAX_CHARS, keep_code: bool = False) -> str:
    """A host value for markdown inline text or a table cell: clean, one line, and unable to open a heading,
    HTML, a link, an image or (unless keep_code, for prose that quotes commands) a code span, or to end a
    table cell."""
    text = clean(value, limit)
    if _MD_ANY.search(text) is None and _MD_LINE_START.match(text) is None:
        return text  # nothing markdown could read as syntax: the common case (numbers, names), told in two scans
    return md_escaped(text, keep_code)


def md_escaped(text: str, keep_code: bool = False) -> str:
    """Every markdown escape md applies, applied to clean one-line text (md skips them where none would apply)."""
    special = _MD_SPECIAL_KEEP_CODE if keep_code else _MD_SPECIAL
    text = special.sub(r"\\\1", text)
    text = _MD_LINK.sub(lambda m: "\\]" + m.group(1) if m.group(1) else "!\\[", text)
    text = text.replace("://", ":\\//").replace("www.", "www\\.")  # no bare-URL autolink
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def code(value: Any, limit: int = MAX_CHARS) -> str:
    """A host value as an inline code span: nothing inside is markdown; the delimiter outlasts any backtick run."""
    text = clean(value, limit).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fence_for(text: str) -> str:
    """A code fence longer than any backtick run inside `text`, so the text cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def clean_data(value: Any, depth: int = 0, limit: int = MAX_CHARS) -> Any:
    """Probe data with every string cleaned and capped, containers bounded, nesting cut at MAX_DEPTH.

    What needs no change is returned as it is, containers included: a 10,000-host report cleans millions of
    values, nearly all of them already clean, and copying them would double the run in memory."""
    kind = type(value)
    if kind is str:
        return value if len(value) <= limit and value.isprintable() else clean(value, limit, keep_newlines=True)
    if kind is dict or kind is list:
        if depth >= MAX_DEPTH:
            return f"<nested deeper than {MAX_DEPTH} levels: not read>"
        return _clean_dict(value, depth, limit) if kind is dict else _clean_list(value, depth, limit)
    if isinstance(value, str):
        return clean(value, limit, keep_newlines=True)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if abs(value) < 10**18 else clean(value, 40)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if depth >= MAX_DEPTH:
        return f"<nested deeper than {MAX_DEPTH} levels: not read>"
    if isinstance(value, (dict, list, tuple)):
        return clean_data(dict(value) if isinstance(value, dict) else list(value), depth, limit)
    return clean(value, limit)


def _clean_dict(value: dict[Any, Any], depth: int, limit: int) -> dict[Any, Any]:
    """The dict itself when cleaning keeps all of it as it is (the common case, told without a copy); else a
    cleaned copy."""
    if _dict_kept(value, depth, limit):
        return value
    return {clean(k, 128): clean_data(v, depth + 1, limit) for k, v in itertools.islice(value.items(), MAX_ITEMS)}


def _clean_list(value: list[Any], depth: int, limit: int) -> list[Any]:
    """The list itself when cleaning keeps all of it as it is; else a cleaned copy."""
    if _list_kept(value, depth, limit):
        return value
    return [clean_data(v, depth + 1, limit) for v in value[:MAX_ITEMS]]


def _dict_kept(value: dict[Any, Any], depth: int, limit: int) -> bool:
    if len(value) > MAX_ITEMS:
        return False
    for key in value:
        if type(key) is not str or len(key) > 128 or not key.isprintable():
            return False
    return _items_kept(value.values(), depth, limit)


def _list_kept(value: list[Any], depth: int, limit: int) -> bool:
    return len(value) <= MAX_ITEMS and _items_kept(value, depth, limit)


def _items_kept(items: Iterable[Any], depth: int, limit: int) -> bool:
    """Whether cleaning keeps every item of a container at `depth` as it is: a short printable string, a finite
    float, a small int, a bool or None, or a container within depth all of whose items are. Only looks; a plain
    loop, as this runs over every value of every host (a generator per container costs it twice the time)."""
    for item in items:
        kind = type(item)
        if kind is str:
            if len(item) > limit or not item.isprintable():
                return False
        elif kind is float:
            if item != item or item == _INF or item == -_INF:
                return False
        elif kind is int:
            if not -(10**18) < item < 10**18:
                return False
        elif kind is dict:
            if depth + 1 >= MAX_DEPTH or not _dict_kept(item, depth + 1, limit):
                return False
        elif kind is list:
            if depth + 1 >= MAX_DEPTH or not _list_kept(item, depth + 1, limit):
                return False
        elif kind is not bool and item is not None:
            return False
    return True


_INF = float("inf")


def _clean_probe(result: ProbeResult) -> ProbeResult:
    return dataclasses.replace(
        result,
        status=clean(result.status, 32),
        data=clean_data(result.data),
        error=clean_data(result.error) if isinstance(result.error, dict) else None,
        reason=clean(result.reason) if result.reason is not None else None,
    )


def clean_host(host: HostResult, cleaned: dict[int, dict] | None = None) -> HostResult:
    """`cleaned`: probes already cleaned in this pass, by the id of the dict they came from (hosts that read
    the same probe data share one dict: run_loader.load_run), so each is cleaned once. A slim host was cleaned
    before its data was dropped (gpudiag/derived.py) and is returned as it is."""
    if is_slim(host):
        return host
    probes = cleaned.get(id(host.probes)) if cleaned is not None else None
    if probes is None:
        probes = {clean(name, 64): _clean_probe(p) for name, p in list(host.probes.items())[:64]}
        if cleaned is not None:
            cleaned[id(host.probes)] = probes
    tail = (
        {clean(k, 32): clean(v, 4096, keep_newlines=True) for k, v in (host.output_tail or {}).items()}
        if isinstance(host.output_tail, dict)
        else None
    )
    return dataclasses.replace(
        host,
        name=clean(host.name, 128),
        status=clean(host.status, 32),
        reason=clean(host.reason),
        address=clean(host.address, 256),
        transport=clean(host.transport, 32),
        python=clean(host.python),
        probes=probes,
        output_tail=tail,
        oom=clean_data(host.oom) if isinstance(host.oom, dict) else None,
    )


def clean_run(run: LoadedRun) -> LoadedRun:
    """The run as rules and renderers should read it: every host string bounded and free of controls. A run
    this made is returned as it is (the report cleans once, its renderers ask again)."""
    if _CLEANED.get(id(run)) is run:
        return run
    manifest = dataclasses.replace(
        run.manifest,
        extra=clean_data(run.manifest.extra) or {},
        argv=tuple(clean(a, 256) for a in run.manifest.argv[:64]),
        hosts=tuple(clean_data(h) for h in run.manifest.hosts),
    )
    probes: dict[int, dict] = {}  # the run holds every host's probes while this runs: their ids stay theirs
    cleaned = dataclasses.replace(run, manifest=manifest, hosts=tuple(clean_host(h, probes) for h in run.hosts))
    _CLEANED[id(cleaned)] = cleaned
    return cleaned


_CLEANED: "weakref.WeakValueDictionary[int, LoadedRun]" = weakref.WeakValueDictionary()
