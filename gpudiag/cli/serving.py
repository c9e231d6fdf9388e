"""`gpudiag serving --log FILE`: a saved sglang server log (or bench_serving output) read offline with the
parser the deployment probe runs on the host (probes/servingstats, standard library only), so a saved log
and a live one give the same figures."""

from __future__ import annotations

import json
from typing import Any

import click

from gpudiag.cli import ExitCode, UserError
from gpudiag.render.safe_text import console as safe
from gpudiag.repro.logrun import LogUnreadable, cut_fields, read_tail
from probes.servingstats.buckets import BUCKET_NAMES
from probes.servingstats.figures import figures


@click.command()
@click.option(
    "--log", "log_file", required=True, metavar="FILE", help="The server's log, or bench_serving output ('-': stdin)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON (docs/serving.md).")
@click.option(
    "--decode-log-interval",
    "interval",
    type=click.IntRange(min=1),
    default=None,
    help="The server's --decode-log-interval, when its log does not print its server_args line (default: 40).",
)
@click.option(
    "--cuda-graph-max-bs",
    "max_bs",
    type=click.IntRange(min=1),
    default=None,
    help="The server's largest captured batch size, when its log does not say: decode lines above it are eager.",
)
def serving(log_file: str, as_json: bool, interval: int | None, max_bs: int | None) -> int:
    """Read a saved sglang log's decode and prefill lines: acceptance length and throughput by concurrency.

    The last 8 MiB are read, as on a host, for at most 20 s (GPUDIAG_LOG_READ_SECONDS). Decode lines are grouped by #running-req (0, 1, 2-3, … 128+);
    each bucket has its line count, median gen throughput (lines after idle left out: a gap well beyond the
    server's cadence, or a prefill into an empty server) and median accept len. A log spanning restarts is
    split at each launch: the figures are the last run's. A "Serving Benchmark Result" block of
    sglang.bench_serving is read too.
    """
    try:
        found = read_tail(log_file)
    except LogUnreadable as exc:
        raise UserError(str(exc)) from None
    out: dict[str, Any] = dict(
        figures(found.text, {"decode_log_interval": interval, "cuda_graph_max_bs": max_bs}),
        source="stdin" if log_file == "-" else log_file,
        bytes_read=found.bytes_read,
        truncated=found.truncated,
        **cut_fields(found),
    )
    if as_json:
        click.echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        for line in describe(out):
            click.echo(safe(line, 2000))
    # A log with no stats lines measured nothing: that is said, and the exit status does not call it checked.
    read_any = out.get("decode_lines") or out.get("prefill_lines") or out.get("bench")
    return ExitCode.OK if read_any else ExitCode.INCOMPLETE


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _bucket_row(name: str, b: dict[str, Any]) -> str:
    row = (
        f"{name:>12}  {b['count']:>6}  {b['steady']:>6}  {_num(b['median_gen_throughput']):>10}"
        f"  {_num(b['median_accept_len']):>10}"
    )
    if b.get("few_sample"):
        row += "  few-sample" + (" (the ranks' first lines)" if b.get("from_first_lines") else "")
    if b.get("why"):
        row += f"  no figure: {b['why']}"
    return row


def describe(out: dict[str, Any]) -> list[str]:
    """Plain lines for the terminal, rendered from the figures."""
    window = f"{out.get('source')}: {out['decode_lines']} decode, {out['prefill_lines']} prefill lines"
    timed = out.get("cut") == "time"
    window += " (the last 8 MiB)" if out.get("truncated") and not timed else ""
    if out.get("first_ts"):
        window += f", {out['first_ts']} to {out['last_ts']}"
    lines = [window] + ([f"{out.get('source')}: {out.get('cut_note')}"] if timed else [])
    if (out.get("runs") or 1) > 1:
        lines.append(
            f"the log spans {out['runs']} server runs (split at each launch's server_args line): figures of the "
            f"last; earlier runs: "
            + "; ".join(
                f"{r.get('decode_lines')} decode lines, {r.get('first_ts') or '?'} to {r.get('last_ts') or '?'}"
                for r in out.get("earlier_runs") or []
            )
        )
    if out.get("ranks"):
        lines.append("ranks: " + ", ".join(out["ranks"]))
    if out["decode_lines"]:
        lines.append(
            f"median accept len: {_num(out.get('median_accept_len'))}"
            + ("" if out.get("median_accept_len") is not None else " (no accept len: speculation off)")
        )
        graph = out["graph"]
        lines.append(f"graph on {graph['true']}, off {graph['false']}, not logged {graph['absent']} (decode lines)")
        cadence = out.get("cadence") or {}
        if cadence:
            lines.append(
                f"idle judged from a line every {cadence['decode_log_interval']} decode steps ({cadence['from']})"
            )
        lines.append(f"{'#running-req':>12}  {'lines':>6}  {'steady':>6}  {'gen tok/s':>10}  {'accept len':>10}")
        for name in BUCKET_NAMES:
            b = out["buckets"].get(name)
            if b:
                lines.append(_bucket_row(name, b))
        eager = out.get("eager_by_rule") or {}
        if eager.get("lines"):
            lines.append(
                f"{eager['lines']} decode lines above the largest captured batch size {eager['max_bs']} "
                f"({eager['from']}): eager by sglang's rule"
            )
        dp = out.get("dp_sum")
        if dp:
            lines.append(
                f"DP attention: {dp['dp_ranks']} DP ranks, each logs its own line; server total "
                f"(sum of the ranks' current lines, {dp['seconds_with_all_ranks']} moments with every rank): "
                f"{_num(dp['median_gen_throughput'])} tok/s" + (" few-sample" if dp.get("few_sample") else "")
            )
    for block in out.get("bench") or []:
        lines.append(
            f"bench_serving: concurrency {block.get('concurrency', '-')}, output "
            f"{_num(block.get('output_throughput'))} tok/s, accept length {_num(block.get('accept_length'))}"
            " (the server's lifetime average)"
        )
    if not out["decode_lines"] and not out["prefill_lines"] and not out.get("bench"):
        lines.append("no Decode batch, Prefill batch or Serving Benchmark Result lines in this log")
    return lines
