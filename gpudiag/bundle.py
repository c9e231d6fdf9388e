"""Packs `probes/` into one stdin payload, the bootstrap that runs it, and reads the framed answer.

Nothing touches the host's disk: the bootstrap (probes/boot.py) installs an in-memory importer for the
probe modules and runs `probes.runner.main`. The payload is one line of JSON: standard library only.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from dataclasses import dataclass
from importlib import resources
from typing import Any

# The bootstrap lives with the probes (their children start the same way); using it is part of
# packing them.
from probes.boot import child_argv

from gpudiag.jsonfile import DocumentError, decode_document
from gpudiag.valid_text import may_hold_surrogates, valid_unicode

# The probe catalog (names, sets, what each reads from) is shared with the runner; reading it is part
# of choosing what to pack.
from probes.catalog import (  # noqa: E402,F401
    ALL_PROBES,
    DEEP_PROBES,
    EXPLICIT_PROBES,
    LIGHT_PROBES,
    PROBE_NEEDS,
    PROBE_TIMEOUTS,
    with_needs,
)

FRAME_RE_TEMPLATE = r"^GPUDIAG-BEGIN {nonce}\r?\n(.*?)\r?\nGPUDIAG-END {nonce}\r?$"


# Every run needs these; a probe brings the top-level modules and subpackages its code names.
CORE_UNITS = ("runner", "context", "boot")
_UNIT_REFERENCE = re.compile(r"\bprobes\.([A-Za-z_][A-Za-z0-9_]*)")
# `from probes import a, b` names units too.
_FROM_IMPORT = re.compile(r"^\s*from probes import ([A-Za-z0-9_, ]+)", re.M)


@functools.lru_cache(maxsize=1)
def _all_modules() -> tuple[tuple[str, bool, str], ...]:
    """Every module of the `probes` package, read once per process: (dotted name, is_package, source)."""
    found: list[tuple[str, bool, str]] = []

    def walk(traversable: Any, dotted: str) -> None:
        for entry in sorted(traversable.iterdir(), key=lambda e: e.name):
            if entry.is_dir():
                if entry.name.startswith((".", "__")) or not entry.joinpath("__init__.py").is_file():
                    continue
                sub = f"{dotted}.{entry.name}"
                found.append((sub, True, entry.joinpath("__init__.py").read_text(encoding="utf-8")))
                walk(entry, sub)
            elif entry.name.endswith(".py") and entry.name != "__init__.py":
                found.append((f"{dotted}.{entry.name[:-3]}", False, entry.read_text(encoding="utf-8")))

    root = resources.files("probes")
    found.append(("probes", True, root.joinpath("__init__.py").read_text(encoding="utf-8")))
    walk(root, "probes")
    return tuple(found)


def probe_modules(probes: list[str] | None = None) -> dict[str, tuple[bool, str]]:
    """The modules of the `probes` package as {dotted name: (is_package, source)}: all of them, or only
    what the given probes need. A probe needs every top-level module or subpackage that its code names
    as `probes.X`, in an import or a string (children are started by "module:function" names), and so on
    transitively; a light scan then sends half the bytes a deep one does."""
    modules = {name: (is_package, source) for name, is_package, source in _all_modules()}
    if probes is None:
        return modules
    units: dict[str, list[str]] = {}
    for name in modules:
        units.setdefault(name.split(".")[1] if "." in name else "", []).append(name)
    wanted: set[str] = set()
    pending = [u for u in (*CORE_UNITS, *probes) if u in units]
    while pending:
        unit = pending.pop()
        if unit in wanted:
            continue
        wanted.add(unit)
        for name in units[unit]:
            pending.extend(u for u in _referenced_units(modules[name][1]) if u in units and u not in wanted)
    return {name: modules[name] for name in modules if "." not in name or name.split(".")[1] in wanted}


def _referenced_units(source: str) -> list[str]:
    found = _UNIT_REFERENCE.findall(source)
    for names in _FROM_IMPORT.findall(source):
        found.extend(n.strip() for n in names.split(",") if n.strip())
    return found


@functools.lru_cache(maxsize=16)
def _packed_modules(probes: tuple[str, ...]) -> str:
    """The modules a selection needs, as the payload's JSON: most of every host's payload and the same for
    every host of a scan, so encoded once (about 400 KB for the light set)."""
    return json.dumps({k: list(v) for k, v in probe_modules(list(probes)).items()})


@dataclass(frozen=True)
class Payload:
    nonce: str
    data: bytes


def build_payload(
    probes: list[str] | None,
    options: dict[str, Any] | None = None,
    timeouts: dict[str, float] | None = None,
    host: str | None = None,
    probe_timeout: float | None = None,
    nonce: str | None = None,
    budget_s: float | None = None,
    watch_stdin: bool = False,
) -> Payload:
    """The stdin document for one host: probe code, the probe selection, their options and limits
    (`budget_s`: the seconds the runner has in all, so it can answer before the host's deadline; `watch_stdin`:
    stdin stays open and its end means the control side is gone)."""
    nonce = nonce or secrets.token_hex(8)
    doc: dict[str, Any] = {
        "entry": "probes.runner:main",
        "nonce": nonce,
        "probes": list(probes) if probes else None,
        "options": options or {},
        "timeouts": timeouts or {},
        "host": host,
    }
    if probe_timeout is not None:
        doc["probe_timeout"] = probe_timeout
    if budget_s is not None:
        doc["budget_s"] = budget_s
    if watch_stdin:
        doc["watch_stdin"] = True
    # The host's own fields, then the modules encoded once: one JSON object on one line, as json.dumps makes it.
    # The newline ends the line where no EOF follows (a stdin held open, `watch_stdin`).
    line = json.dumps(doc)[:-1] + ', "modules": ' + _packed_modules(tuple(probes or LIGHT_PROBES)) + "}\n"
    return Payload(nonce=nonce, data=line.encode("utf-8"))


def bootstrap_argv(python: str) -> list[str]:
    """`PYTHON -I -c BOOTSTRAP` with the bootstrap as one line: csh login shells refuse newlines in quotes."""
    return child_argv(python)


class FrameError(ValueError):
    """The output holds no complete, parseable frame."""


def extract_frame(stdout: bytes, nonce: str) -> dict[str, Any]:
    """The JSON document between this run's frame lines; banners and noise around it are ignored."""
    # Found in the bytes and only the frame decoded, straight from a view of them: the output around it (and a
    # copy of the whole output as text) never costs memory on top of the frame itself.
    pattern = re.compile(FRAME_RE_TEMPLATE.format(nonce=re.escape(nonce)).encode(), re.S | re.M)
    match = pattern.search(stdout)
    if match is None:
        if f"GPUDIAG-BEGIN {nonce}".encode() in stdout:
            raise FrameError("the probe output starts a frame but never ends it (truncated output)")
        raise FrameError("the probe output holds no gpudiag frame")
    with memoryview(stdout) as view:
        frame = str(view[match.start(1) : match.end(1)], "utf-8", "replace")
    try:
        doc = decode_document(frame)
    except DocumentError as exc:
        raise FrameError(f"the frame is not readable: {exc}") from None
    if not isinstance(doc, dict):
        raise FrameError("the frame is not a JSON object")
    return valid_unicode(doc) if may_hold_surrogates(frame) else doc


def tail(data: bytes, limit: int = 2000) -> str:
    return data[-limit:].decode("utf-8", "replace")
