"""Stored documents read defensively: the schema version, and fields of the wrong type refused by name.

Every misfit is a SchemaError whose message names the document and the field, never a traceback.
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 1


class SchemaError(ValueError):
    """A stored document this version cannot read."""


def check_schema(doc: Any, what: str) -> None:
    """Refuse what is not a gpudiag document (not an object, no schema) or was written by a newer major schema,
    with a message naming the document."""
    if not isinstance(doc, dict):
        raise SchemaError(f"{what}: not a JSON object")
    version = doc.get("schema")
    if not isinstance(version, int):
        raise SchemaError(f"{what}: no integer 'schema' field; not a gpudiag document")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{what}: schema {version} is newer than this gpudiag reads ({SCHEMA_VERSION}); upgrade gpudiag"
        )


def number_field(doc: dict[str, Any], key: str, what: str) -> float:
    """A numeric field (absent or null reads as 0); anything else is a SchemaError naming it."""
    value = doc.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{what}: {key!r} is {shown(value)}, not a number")
    return float(value)


def typed_field(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str, noun: str) -> Any:
    """A field that is absent, null, or of `kind`; anything else is a SchemaError naming it."""
    value = doc.get(key)
    if value is not None and not isinstance(value, kind):
        raise SchemaError(f"{what}: {key!r} is {shown(value)}, not {noun}")
    return value


def shown(value: Any) -> str:
    """A value as an error message quotes it: its repr, cut at 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
