"""Markdown building blocks shared by the report's sections: escaped cells, tables, fenced snippets."""
from __future__ import annotations

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
