"""A host whose probe data was read once and dropped: what the report derived from it, kept by function.

`gpudiag report` reads a run's hosts a chunk at a time (gpudiag/cli/report_stream.py): every function marked
`remembered` is called on each host while its data is held, and the host then keeps only its probes' statuses
(`SlimProbes`) and those results. A later call of a remembered function on that host returns the kept result;
reading a slim host's data any other way raises `DataDropped`, so a reader that was not remembered fails loudly
instead of reading nothing. Memory then follows what is derived per host, not the hosts' data.
"""

from __future__ import annotations

import dataclasses
import functools
import pickle
import zlib
from typing import Any, Callable, Collection, TypeVar, overload

from gpudiag.models import HostResult

F = TypeVar("F", bound=Callable[..., Any])

# Every remembered function by its key, in the order they were marked: what a host's chunk pass calls.
REMEMBERED: dict[str, Callable[..., Any]] = {}
COMPRESSED: set[str] = set()  # the keys whose results are kept compressed


class DataDropped(LookupError):
    """A slim host's probe data was asked for by a reader that was not remembered."""


class SlimProbes(dict):
    """probe name -> its result without data (status, duration, reason, error kept), and `derived`: each
    remembered function's result for this host, by key. Names, statuses and `len` read as before; `get` and
    `[]` (what reads data) raise DataDropped."""

    derived: dict[str, Any]
    agreement: bytes | None  # the same for hosts whose data was the same text (run_loader's digest)
    # Hosts that agree share one SlimProbes, derived once for a stand-in named `named`: the results under
    # `renamed_keys` are read with that name replaced by the reading host's own.
    named: str | None
    renamed_keys: frozenset[str]

    def get(self, key: Any, default: Any = None) -> Any:
        raise DataDropped(f"probe {key!r}: its data was dropped after the report derived what it needs")

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)


def key_of(function: Callable[..., Any]) -> str:
    """A remembered function's key in REMEMBERED and in a slim host's results."""
    return f"{function.__module__}.{function.__qualname__}"


@overload
def remembered(function: F) -> F: ...


@overload
def remembered(*, compressed: bool) -> Callable[[F], F]: ...


def remembered(function: F | None = None, *, compressed: bool = False) -> Any:
    """Mark a function of one host (first argument) whose result a slim host keeps (`@remembered`), as pickle
    bytes; `@remembered(compressed=True)`: compressed too, for a large result read once (an appendix section).
    Compressing costs each host more CPU than pickling its results (zlib at ~60 MB/s here) and is kept for those."""
    if function is None:
        return lambda given: _remember(given, compressed)
    return _remember(function, compressed)


def _remember(function: F, compressed: bool) -> F:
    key = key_of(function)
    if compressed:
        COMPRESSED.add(key)

    @functools.wraps(function)
    def wrapper(host: HostResult, *args: Any, **kwargs: Any) -> Any:
        probes = host.probes
        if type(probes) is SlimProbes:
            if key not in probes.derived:
                raise DataDropped(f"{key}: not derived before {host.name}'s data was dropped")
            kept = probes.derived[key]
            if isinstance(kept, Packed):
                kept = kept.value()
            if isinstance(kept, Raised):
                raise kept.error
            if probes.named and key in probes.renamed_keys and host.name != probes.named:
                kept = name_template(kept, probes.named)(host.name)
            return kept
        return function(host, *args, **kwargs)

    REMEMBERED[key] = wrapper
    return wrapper  # type: ignore[return-value]


class Raised:
    """A remembered function raised on the host's data: a later call raises the same error."""

    def __init__(self, error: Exception):
        self.error = error


class Packed:
    """A remembered result kept as pickle bytes (compressed for the keys in COMPRESSED): it shares nothing with
    the data it was derived from (a finding's table, an answer's figures would otherwise keep parts of it alive),
    at a few times less memory than its objects; each read builds a fresh copy."""

    __slots__ = ("blob", "compressed")

    def __init__(self, value: Any, compressed: bool = False):
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self.blob, self.compressed = (zlib.compress(blob, 1) if compressed else blob), compressed

    def value(self) -> Any:
        return pickle.loads(zlib.decompress(self.blob) if self.compressed else self.blob)


def packed(value: Any, compressed: bool = False) -> Any:
    """`value` as Packed, or as it is when it cannot be pickled."""
    try:
        return Packed(value, compressed)
    except Exception:  # noqa: BLE001 - e.g. a lambda inside: kept as objects
        return value


def slim_probes(
    host: HostResult,
    derived: dict[str, Any],
    agreement: bytes | None,
    named: str | None = None,
    renamed_keys: frozenset[str] = frozenset(),
) -> SlimProbes:
    """The host's probes with their data dropped, keeping `derived` (remembered results, or Raised, by key);
    `named`: the stand-in name the results under `renamed_keys` were derived for (hosts that agree share them)."""
    slim = SlimProbes((name, dataclasses.replace(result, data=None)) for name, result in host.probes.items())
    slim.derived = {key: packed(value, key in COMPRESSED) for key, value in derived.items()}
    slim.agreement = agreement
    slim.named, slim.renamed_keys = named, renamed_keys
    return slim


def narrowed(slim: SlimProbes, keys: Collection[str]) -> SlimProbes:
    """`slim` with only the results under `keys` (the others' memory freed once `slim` is dropped)."""
    out = SlimProbes(slim)
    out.derived = {key: value for key, value in slim.derived.items() if key in keys}
    out.agreement, out.named, out.renamed_keys = slim.agreement, slim.named, slim.renamed_keys
    return out


def name_template(value: Any, old: str, memo: dict[int, bool] | None = None) -> Callable[[str], Any]:
    """A function of a host's name giving `value` with `old` in its strings read as that name: built once, it
    rebuilds only what mentions `old` (strings, tuples, lists, dicts, dataclasses' init fields) and shares the rest."""
    memo = {} if memo is None else memo
    if not _mentions(value, old, memo):
        return lambda name: value
    if isinstance(value, str):
        return lambda name: value.replace(old, name)
    if isinstance(value, (tuple, list)):
        parts = [name_template(v, old, memo) for v in value]
        kind = type(value)
        return lambda name: kind(part(name) for part in parts)
    if isinstance(value, dict):
        pairs = [(name_template(k, old, memo), name_template(v, old, memo)) for k, v in value.items()]
        return lambda name: {k(name): v(name) for k, v in pairs}
    changed = [
        (f.name, name_template(getattr(value, f.name), old, memo))
        for f in dataclasses.fields(value)
        if f.init and _mentions(getattr(value, f.name), old, memo)
    ]
    return lambda name: dataclasses.replace(value, **{field: template(name) for field, template in changed})


def _mentions(value: Any, old: str, memo: dict[int, bool]) -> bool:
    """Whether `old` appears anywhere in `value`, remembered per object: a group's findings are walked once."""
    if isinstance(value, str):
        return old in value
    known = memo.get(id(value))
    if known is not None:
        return known
    if isinstance(value, (tuple, list)):
        found = any([_mentions(v, old, memo) for v in value])
    elif isinstance(value, dict):
        found = any([_mentions(k, old, memo) or _mentions(v, old, memo) for k, v in value.items()])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        found = any([_mentions(getattr(value, f.name), old, memo) for f in dataclasses.fields(value)])
    else:
        found = False
    memo[id(value)] = found
    return found


def is_slim(host: HostResult) -> bool:
    return type(host.probes) is SlimProbes
