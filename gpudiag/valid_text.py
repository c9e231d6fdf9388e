"""Host strings made valid Unicode as a frame is read: JSON's `\\ud800` escapes (and text decoded with
surrogateescape) give Python strings holding lone surrogates, which no UTF-8 writer accepts, so one such
string would break every report of the fleet. Each lone surrogate becomes U+FFFD, the replacement
character, which marks where the host's text was not valid."""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# What in a frame's text can become a lone surrogate: a raw one, or a \uD800-\uDFFF escape.
_MAY_HOLD = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def may_hold_surrogates(text: str) -> bool:
    """False when decoding `text` as JSON cannot give a lone surrogate (most frames: one C-speed scan)."""
    return _MAY_HOLD.search(text) is not None


def valid_unicode(value: Any) -> Any:
    """`value` with every lone surrogate in its strings and keys replaced; other values as they are.
    Walks with a stack, not recursion: a document is as deep as the frame's reader allowed."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, str):
            if _SURROGATE.search(item):
                parent[key] = _SURROGATE.sub(REPLACEMENT, item)
        elif isinstance(item, list):
            stack.extend((item, index) for index in range(len(item)))
        elif isinstance(item, dict):
            if any(isinstance(k, str) and _SURROGATE.search(k) for k in item):
                item = parent[key] = {_fixed(k): v for k, v in item.items()}
            stack.extend((item, k) for k in item)
    return root[0]


def _fixed(key: Any) -> Any:
    return _SURROGATE.sub(REPLACEMENT, key) if isinstance(key, str) else key
