"""The bench load of a run (`gpudiag bench`): one row per host, server and concurrency level, for the markdown
report, the JSON report and the console. Rows are built once here from the stored probe data; every output
renders from them. A server that was not loaded is a row with its reason."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text

from gpudiag.findings import BUCKET_NAMES, bucket_text
from gpudiag.derived import remembered
from gpudiag.models import HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.probe_view import as_dict, as_list, probe
from gpudiag.render.blocks import table
from gpudiag.render.safe_text import console as console_text, md

PROBE = "servingbench"
HEADER = ["host", "server", "concurrency", "answered", "output tok/s", "TTFT ms", "ITL ms", "latency ms", "accept len"]
FIGURES = (
    "sent",
    "answered",
    "failed",
    "duration_s",
    "output_tokens",
    "output_throughput",
    "median_ttft_ms",
    "median_itl_ms",
    "median_tpot_ms",
    "median_latency_ms",
    "p90_latency_ms",
    "median_accept_len",
)


GRAPH = ("true", "false", "absent")
BUCKET_FIGURES = ("count", "steady", "median_gen_throughput", "median_accept_len")
MAX_TEXT = 300  # characters of a reason or error a host sends


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _numbers(value: Any, keys: Sequence[str]) -> dict[str, float | int | None]:
    """Only the named figures of a host's object, each a number or None: nothing else travels on."""
    found = as_dict(value)
    return {k: _number(found.get(k)) for k in keys}


def bench_rows(run: LoadedRun) -> list[dict[str, Any]]:
    """{host, pid, port, concurrency, figures…} per level; {host, pid, port, reason} for a server not loaded."""
    return [row for host in run.hosts for row in host_bench_rows(host)]


@remembered
def host_bench_rows(host: HostResult) -> list[dict[str, Any]]:
    """bench_rows for one host."""
    rows: list[dict[str, Any]] = []
    data = as_dict(probe(host, PROBE))
    for _, server in sorted(as_dict(data.get("servers")).items(), key=lambda kv: str(kv[0])):
        server = as_dict(server)
        base: dict[str, Any] = {
            "host": host.name,
            "pid": _number(server.get("pid")),
            "port": _number(server.get("port")),
        }
        levels = [as_dict(level) for level in as_list(server.get("levels"))]
        if not levels:
            reason = str(server.get("reason") or server.get("stopped") or "no level ran")[:MAX_TEXT]
            rows.append(dict(base, reason=reason))
        for level in levels:
            row: dict[str, Any] = dict(base, concurrency=_number(level.get("concurrency")))
            row.update((k, _number(level.get(k))) for k in FIGURES)
            row["errors"] = [str(e)[:MAX_TEXT] for e in as_list(level.get("errors"))][:3]
            rows.append(row)
    return rows


def log_rows(run: LoadedRun) -> list[dict[str, Any]]:
    """Per loaded server, the serving figures of the decode lines it wrote during the load, or why none."""
    return [row for host in run.hosts for row in host_log_rows(host)]


@remembered
def host_log_rows(host: HostResult) -> list[dict[str, Any]]:
    """log_rows for one host."""
    rows: list[dict[str, Any]] = []
    for _, server in sorted(as_dict(as_dict(probe(host, PROBE)).get("servers")).items(), key=lambda kv: str(kv[0])):
        server = as_dict(server)
        if not server.get("loaded"):
            continue
        log = as_dict(server.get("log"))
        row: dict[str, Any] = {"host": host.name, "pid": _number(server.get("pid"))}
        if "decode_lines" in log:
            row.update(decode_lines=_number(log.get("decode_lines")), graph=_numbers(log.get("graph"), GRAPH))
            row["median_accept_len"] = _number(log.get("median_accept_len"))
            buckets = as_dict(log.get("buckets"))
            row["buckets"] = {n: _numbers(buckets[n], BUCKET_FIGURES) for n in BUCKET_NAMES if n in buckets}
            if log.get("cut_note"):  # the host's read of the log stopped at its time limit
                row["cut_note"] = str(log["cut_note"])[:MAX_TEXT]
        else:
            row["reason"] = str(log.get("reason") or "log not read during the load")[:MAX_TEXT]
        rows.append(row)
    return rows


def _log_line(row: dict[str, Any]) -> str:
    head = f"{row['host']} pid {row['pid']}: "
    if "reason" in row:
        return head + row["reason"]
    accept = _number(row.get("median_accept_len"))
    return (
        head
        + f"{row['decode_lines']} decode lines during the load"
        + (f", accept len {accept:.2f}" if accept is not None else "")
        + (f"; tok/s by #running-req {bucket_text(row)}" if bucket_text(row) else "")
        + (f" ({row['cut_note']})" if row.get("cut_note") else "")
    )


def _cell(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cells(row: dict[str, Any]) -> list[str]:
    server = f"pid {row['pid']} port {row['port']}"
    if "reason" in row:
        return [row["host"], server, "-", "-", "-", "-", "-", "-", f"not loaded — {row['reason']}"]
    return [
        row["host"],
        server,
        str(row["concurrency"]),
        f"{row['answered']}/{row['sent']}",
        _cell(row["output_throughput"]),
        _cell(row["median_ttft_ms"]),
        _cell(row["median_itl_ms"]),
        _cell(row["median_latency_ms"]),
        _cell(row["median_accept_len"], 2),
    ]


def table_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    return [HEADER] + [_cells(r) for r in rows]


def console_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """The same rows for the terminal; host text is plain text, never rich markup."""
    table = Table(title=Text(title))
    header, *body = table_rows(rows)
    for column in header:
        table.add_column(column, overflow="fold")
    for cells in body:
        table.add_row(*(Text(console_text(c)) for c in cells))
    return table


def markdown_section(run: LoadedRun) -> list[str]:
    """`## Bench load` with the per-level table, beside Q10's figures from the log; nothing without a bench."""
    if not any(PROBE in h.probes for h in run.hosts):
        return []
    rows = bench_rows(run)
    lines = [
        "## Bench load",
        "",
        "`gpudiag bench`: `/generate` requests with random token ids per concurrency level on loopback. "
        "Streamed: TTFT is the time to the first event, ITL the median gap between events (several tokens "
        "per event with speculation). Accept len is the median over requests of "
        "`completion_tokens / spec_verify_ct`.",
        "",
    ]
    if not rows:
        return lines + ["No live server was found to load.", ""]
    logs = ["- " + md(_log_line(r)) for r in log_rows(run)]
    return lines + table(table_rows(rows)) + (["The server's log during the load:", ""] + logs + [""] if logs else [])
