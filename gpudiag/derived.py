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
from typing import Any, Callable, TypeVar

from gpudiag.models import HostResult

F = TypeVar("F", bound=Callable[..., Any])

# Every remembered function by its key, in the order they were marked: what a host's chunk pass calls.
REMEMBERED: dict[str, Callable[..., Any]] = {}


class DataDropped(LookupError):
    """A slim host's probe data was asked for by a reader that was not remembered."""


class SlimProbes(dict):
    """probe name -> its result without data (status, duration, reason, error kept), and `derived`: each
    remembered function's result for this host, by key. Names, statuses and `len` read as before; `get` and
    `[]` (what reads data) raise DataDropped."""

    derived: dict[str, Any]
    agreement: bytes | None  # the same for hosts whose data was the same text (run_loader's digest)

    def get(self, key: Any, default: Any = None) -> Any:
        raise DataDropped(f"probe {key!r}: its data was dropped after the report derived what it needs")

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)


def key_of(function: Callable[..., Any]) -> str:
    """A remembered function's key in REMEMBERED and in a slim host's results."""
    return f"{function.__module__}.{function.__qualname__}"


def remembered(function: F) -> F:
    """Mark a function of one host (first argument) whose result a slim host keeps."""
    key = key_of(function)

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
            return kept
        return function(host, *args, **kwargs)

    REMEMBERED[key] = wrapper
    return wrapper  # type: ignore[return-value]


class Raised:
    """A remembered function raised on the host's data: a later call raises the same error."""

    def __init__(self, error: Exception):
        self.error = error


class Packed:
    """A remembered result kept as compressed pickle bytes: it shares nothing with the data it was derived from
    (a finding's table, an answer's figures would otherwise keep parts of it alive), at a few times less
    memory than its objects; each read builds a fresh copy."""

    __slots__ = ("blob",)

    def __init__(self, value: Any):
        self.blob = zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)

    def value(self) -> Any:
        return pickle.loads(zlib.decompress(self.blob))


def packed(value: Any) -> Any:
    """`value` as Packed, or as it is when it cannot be pickled."""
    try:
        return Packed(value)
    except Exception:  # noqa: BLE001 - e.g. a lambda inside: kept as objects
        return value


def slimmed(host: HostResult, derived: dict[str, Any], agreement: bytes | None) -> HostResult:
    """The host with its probes' data dropped, keeping `derived` (remembered results, or Raised, by key)."""
    slim = SlimProbes((name, dataclasses.replace(result, data=None)) for name, result in host.probes.items())
    slim.derived = {key: packed(value) for key, value in derived.items()}
    slim.agreement = agreement
    return dataclasses.replace(host, probes=slim)


def is_slim(host: HostResult) -> bool:
    return type(host.probes) is SlimProbes
