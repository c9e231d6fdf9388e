"""Progress events in a host's stderr (probes/events.py writes them): read as they arrive, never trusted.

A line `GPUDIAG-EVENT <nonce> {json}` with this run's nonce becomes a HostEvent handed to a callback; every
other line is the host's own stderr and kept as such. Lines are cut at a fixed length (a longer one is
never an event), fields are type-checked and capped, unknown steps or malformed JSON are dropped, and a
host that floods events is rate-limited. Display code still sanitises the strings (render/safe_text.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARK = b"GPUDIAG-EVENT "
MAX_LINE = 2048  # bytes; the host side writes at most 1024
MAX_TEXT = 120  # characters of a string field
STEPS = ("probe", "device", "cell", "launch", "level")
STATES = ("started", "finished")
BURST = 40  # events passed on at once before the rate limit applies
PER_SECOND = 20.0  # sustained events per second passed on


@dataclass(frozen=True)
class HostEvent:
    """One step on a host: a probe, a GPU, a repro cell or an sglang launch, started or finished."""

    probe: str
    step: str
    state: str
    i: int | None = None
    n: int | None = None
    what: str = ""
    status: str = ""
    duration_s: float | None = None


def parse_event(body: bytes) -> HostEvent | None:
    """The event a line's JSON part describes, or None when it is not one we understand."""
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    probe, step, state = doc.get("probe"), doc.get("step"), doc.get("state")
    if not isinstance(probe, str) or not probe or step not in STEPS or state not in STATES:
        return None
    duration = doc.get("duration_s")
    return HostEvent(
        probe=probe[:MAX_TEXT],
        step=step,
        state=state,
        i=_count(doc.get("i")),
        n=_count(doc.get("n")),
        what=_text(doc.get("what")),
        status=_text(doc.get("status")),
        duration_s=float(duration)
        if isinstance(duration, (int, float)) and not isinstance(duration, bool) and 0 <= duration < 1e7
        else None,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**6 else None


def _text(value: Any) -> str:
    return value[:MAX_TEXT] if isinstance(value, str) else ""


class EventReader:
    """Splits a host's stderr into event lines (parsed, passed to `callback`) and the rest (returned)."""

    def __init__(self, nonce: str, callback: Callable[[HostEvent], None]):
        self.prefix = MARK + nonce.encode("ascii", "replace") + b" "
        self.callback = callback
        self.ignored = 0  # event lines dropped: malformed or over the rate limit
        self._partial = bytearray()
        self._overlong = False  # inside a line already passed on: the rest of it is stderr, not an event
        self._tokens = float(BURST)
        self._refilled = time.monotonic()
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> bytes:
        """Take a chunk of stderr; return the bytes of it that are not event lines. The chunk is searched
        for this run's prefix at line starts (C-speed `find`) and kept in slices between event lines,
        never split line by line: a flood of plain stderr costs about what reading it costs."""
        with self._lock:
            buf = bytes(self._partial) + data if self._partial else data
            self._partial = bytearray()
            kept: list[bytes] = []
            pos = 0
            if self._overlong:  # the rest of a line already passed on is stderr, up to its newline
                end = buf.find(b"\n")
                if end < 0:
                    return buf
                kept.append(buf[: end + 1])
                pos, self._overlong = end + 1, False
            while True:  # pos is at a line start
                hit = self._event_start(buf, pos)
                if hit < 0:
                    break
                kept.append(buf[pos:hit])
                end = buf.find(b"\n", hit)
                if end < 0:
                    self._hold(buf[hit:], kept)
                    return b"".join(kept)
                line = buf[hit : end + 1]
                if not self._take(line):
                    kept.append(line)
                pos = end + 1
            last = buf.rfind(b"\n", pos)
            start = last + 1 if last >= 0 else pos
            kept.append(buf[pos:start])
            self._hold(buf[start:], kept)
            return b"".join(kept)

    def _event_start(self, buf: bytes, pos: int) -> int:
        """Where this run's prefix next starts a line at or after `pos` (itself a line start), or -1."""
        at = buf.find(self.prefix, pos)
        while at > pos and buf[at - 1] != 0x0A:
            at = buf.find(self.prefix, at + 1)
        return at

    def _hold(self, tail: bytes, kept: list[bytes]) -> None:
        """An unfinished last line: held while it may still become an event line, else passed on."""
        if not tail:
            return
        if len(tail) <= MAX_LINE and (tail.startswith(self.prefix) or self.prefix.startswith(tail)):
            self._partial += tail
        else:
            kept.append(tail)
            self._overlong = True

    def rest(self) -> bytes:
        """What is left of an unfinished last line (the host's output ended without a newline)."""
        with self._lock:
            left = bytes(self._partial)
        return left if not left.startswith(self.prefix) else b""

    def _take(self, line: bytes) -> bool:
        """True when the line was an event line of this run (used or dropped), False for other stderr."""
        if not line.startswith(self.prefix):
            return False
        found = parse_event(line[len(self.prefix) :].strip())
        if found is None or not self._allowed():
            self.ignored += 1
            return True
        try:
            self.callback(found)
        except Exception:  # a display problem never costs the host its result
            self.ignored += 1
        return True

    def _allowed(self) -> bool:
        now = time.monotonic()
        self._tokens = min(float(BURST), self._tokens + (now - self._refilled) * PER_SECOND)
        self._refilled = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
