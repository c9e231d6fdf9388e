"""The console view of one host's repro: its cell matrix, boundaries, signatures, interpreter and notes."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpudiag.render.safe_text import console as safe
from gpudiag.repro import summary


def print_host(console: Console, item: summary.HostRepro) -> None:
    # Everything below comes from the host (names, reasons, log lines): cleaned by the console sanitiser (no
    # escapes or controls, capped) and printed as text, never as rich markup.
    if not item.ran:
        console.print(
            Text.assemble((safe(item.host), "bold"), f": could not run the repro: {safe(item.reason)}"), style="red"
        )
        return
    table = Table(title=Text(safe(f"{item.host}: {item.environment_line()}", 1000)), title_justify="left")
    for column in summary.COLUMNS:
        table.add_column(column, overflow="fold")
    for row in summary.cell_rows(item):
        table.add_row(*(Text(safe(value)) for value in row))
    console.print(table)
    if item.all_skipped:
        console.print(
            Text(f"nothing ran: {safe(item.data.get('skip_reason') or 'every cell skipped')}"), style="yellow"
        )
    for boundary in item.data.get("boundaries") or []:
        if isinstance(boundary, dict) and boundary.get("text"):
            console.print(Text(f"boundary: {safe(boundary['text'])}"))
    for signature in item.data.get("signatures") or []:
        if not isinstance(signature, dict):
            continue
        console.print(
            Text(
                safe(
                    f"signature {signature.get('name')}: {signature.get('meaning')} ({signature.get('reference')})",
                    1000,
                )
            )
        )
        assumes = f" (assumes {safe(signature['advice_assumes'])})" if signature.get("advice_assumes") else ""
        console.print(Text(f"  advice{assumes}: {safe(signature.get('recommendation'), 1000)}"))
    print_interpreter(console, item.data)
    for note in item.data.get("notes") or []:
        console.print(Text(f"note: {safe(note)}"), style="dim")


def print_interpreter(console: Console, data: dict[str, Any]) -> None:
    """Which interpreter the repro ran under, why, and the live server it describes."""
    chosen = data.get("interpreter") or {}
    if not chosen.get("path"):
        return
    line = f"interpreter: {chosen['path']} ({chosen.get('reason') or chosen.get('why') or 'unknown'})"
    server = data.get("server") or {}
    if server.get("pid") is not None:
        line += f"; live server pid {server['pid']}" + (f", port {server['port']}" if server.get("port") else "")
    console.print(Text(safe(line, 1000)))
