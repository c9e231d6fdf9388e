"""Fields of config.json read defensively: a checkpoint's config is host data, so a missing or garbled field is a
`ConfigError` naming it, never a traceback."""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """config.json lacks or garbles a field the bytes need: the message names it."""


def int_field(config: dict[str, Any], *names: str, default: int | None = None) -> int:
    """The first of `names` holding a whole number (≥ 1 where the field has no default, ≥ 0 otherwise)."""
    for name in names:
        value = config.get(name)
        if isinstance(value, bool):
            continue
        least = 0 if default is not None else 1
        if isinstance(value, (int, float)) and least <= value < 2**53 and float(value).is_integer():
            return int(value)
    if default is not None:
        return default
    raise ConfigError(f"config.json has no usable {' / '.join(names)}")


def positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
