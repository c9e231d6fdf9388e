"""Markdown building blocks shared by the report's sections: escaped cells, tables, fenced snippets."""
from __future__ import annotations

from typing import Any, Sequence


def cell(value: Any) -> str:
    text = "-" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: Sequence[Sequence[Any]]) -> list[str]:
    header, *body = rows
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return lines + [""]


def fenced(file: str | None, line: int | None, snippet: str, language: str = "python") -> list[str]:
    where = f"# {file}:{line}" if file and line else (f"# {file}" if file else None)
    fence = "````" if "```" in snippet else "```"
    return [fence + language] + ([where] if where else []) + snippet.splitlines() + [fence, ""]
