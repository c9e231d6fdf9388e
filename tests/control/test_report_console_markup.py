"""Host-provided text in console output is printed as text: "[/etc] x" in a name, reason or title never
reaches rich's markup parser (which would raise on the stray closing tag or swallow the brackets)."""
import io
import json

from click.testing import CliRunner
from rich.console import Console

from gpudiag.cli import cli
from gpudiag.cli.repro import _print_host
from gpudiag.repro.summary import HostRepro

ODD = "[/etc] x"


def test_report_console_prints_bracketed_host_name_and_reason_verbatim(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    hosts = [{"schema": 1, "name": ODD, "status": "unreachable", "reason": f"{ODD}: refused"},
             {"schema": 1, "name": "b[bold]", "status": "ok", "probes": {}}]
    (run / "run.json").write_text(json.dumps({"schema": 1, "run_id": "r1", "kind": "scan",
                                              "started_at": "2026-02-02T00:00:00Z", "hosts": hosts}))
    for i, h in enumerate(hosts):
        (run / "hosts" / f"h{i}.json").write_text(json.dumps(h))
    result = CliRunner().invoke(cli, ["report", str(run)], env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 3, result.output            # the unreachable host could not be scanned
    assert ODD in result.output and "b[bold]" in result.output


def test_repro_console_prints_bracketed_reason_notes_and_signatures_verbatim():
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    _print_host(console, HostRepro(ODD, False, f"host unreachable: {ODD}"))
    data = {"cells": [{"path": "eagle_draft", "batch_size": 1, "status": "skipped", "detail": ODD}],
            "skip_reason": ODD, "notes": [ODD], "boundaries": [{"text": ODD}],
            "signatures": [{"name": ODD, "meaning": ODD, "reference": ODD, "recommendation": ODD}]}
    _print_host(console, HostRepro("h[red]", True, "", data))
    text = out.getvalue()
    assert text.count(ODD) >= 7 and "h[red]" in text
    assert f"could not run the repro: host unreachable: {ODD}" in text
