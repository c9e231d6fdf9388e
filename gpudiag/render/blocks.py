"""Markdown building blocks shared by the report's sections: escaped cells, tables, fenced snippets."""

from __future__ import annotations

import os
from typing import Any, Sequence

from gpudiag.render.safe_text import clean, fence_for, md

SNIPPET_CHARS = 4096


def cell(value: Any) -> str:
    return "-" if value in (None, "") else md(value)


def table(rows: Sequence[Sequence[Any]]) -> list[str]:
    header, *body = rows
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return lines + [""]


def fenced(file: str | None, line: int | None, snippet: str, language: str = "python") -> list[str]:
    """A code block no snippet can close early: the fence is longer than any backtick run inside."""
    where = f"# {clean(file)}:{line}" if file and line else (f"# {clean(file)}" if file else None)
    body = clean(snippet, SNIPPET_CHARS, keep_newlines=True)
    fence = fence_for(body)
    return [fence + language] + ([where] if where else []) + body.splitlines() + [fence, ""]


def merge_rows(rows: Sequence[Sequence[Any]], key: int = 0) -> list[tuple[Any, ...]]:
    """Rows that read the same apart from their `key` cell (a GPU index) become one row listing the keys:
    identical GPUs are said once, the odd one stands out."""
    header, *body = rows
    merged: dict[tuple[Any, ...], list[str]] = {}
    for row in body:
        rest = tuple(v for i, v in enumerate(row) if i != key)
        merged.setdefault(rest, []).append(str(row[key]))
    out = [tuple(header)]
    for rest, keys in merged.items():
        out.append(rest[:key] + (", ".join(keys),) + rest[key:])
    return out


def merge_columns(rows: Sequence[Sequence[Any]], first: int = 1) -> list[tuple[Any, ...]]:
    """Columns from `first` on (one per device) that hold the same value in every row become one column whose
    header lists them: "GPU 4, 5, 7"."""
    header, *body = rows
    if not body or any(len(row) != len(header) for row in body):
        return [tuple(row) for row in rows]  # nothing to compare, or a ragged table: shown as it is
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in range(first, len(header)):
        groups.setdefault(tuple(row[i] for row in body), []).append(i)
    keep = [g[0] for g in groups.values()]
    names = {g[0]: _joined([str(header[i]) for i in g]) for g in groups.values()}
    return [tuple(header[:first]) + tuple(names[i] for i in keep)] + [
        tuple(row[:first]) + tuple(row[i] for i in keep) for row in body
    ]


def _joined(headers: list[str]) -> str:
    """'GPU 4', 'GPU 5' → 'GPU 4, 5': the words they share said once."""
    if len(headers) == 1:
        return headers[0]
    prefix = headers[0][: len(os.path.commonprefix(headers))]
    prefix = prefix[: prefix.rfind(" ") + 1]
    return headers[0] + "".join(", " + h[len(prefix) :] for h in headers[1:])
