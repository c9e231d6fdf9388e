"""`gpudiag bundle` writes the probe zipapp for an engine to run; `gpudiag ingest` stores what it collected."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import BinaryIO

import click

from gpudiag.cli import ExitCode, UserError
from gpudiag.cli.common import ResultConsole, reports_dir_option
from gpudiag.cli.scan import selected_probes
from gpudiag.engines import zipapp
from gpudiag.engines.ingest import FORMATS, MAX_TOTAL_BYTES, IngestError, Source, read_bounded
from gpudiag.engines.ingest import ingest as ingest_sources
from gpudiag.models import OK
from gpudiag.render.console import summary_table
from gpudiag.store import RunWriter, StoreError


@click.command("bundle")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("gpudiag-probes.pyz"),
    show_default=True,
    help="Where to write the bundle.",
)
@click.option("--probes", help="Comma-separated probes the bundle runs by default (default: the light set).")
@click.option("--deep", is_flag=True, help="Add the GPU-touching probes to the default set.")
def bundle_cmd(output: Path, probes: str | None, deep: bool) -> None:
    """Write the probes as one zipapp: run it anywhere with `python3 gpudiag-probes.pyz`."""
    names = selected_probes(probes, deep) if (probes or deep) else None
    data = zipapp.build_zipapp(names)
    try:
        output.write_bytes(data)
        output.chmod(0o755)
    except OSError as exc:
        raise UserError(f"{output}: cannot write the bundle: {exc.strerror or exc}") from None
    click.echo(f"{output}: {len(data)} bytes, sha256 {zipapp.digest(data)}")
    click.echo(f"run it on a host with: python3 {output.name}    (then: gpudiag ingest OUTPUT)")


def read_sources(paths: tuple[str, ...]) -> list[Source]:
    """Files, every file of a directory (one file per host), or `-` for stdin; each read within ingest's
    bounds (read_bounded)."""
    sources: list[Source] = []
    left = MAX_TOTAL_BYTES
    for spec in paths:
        if spec == "-":
            sources.append(Source("-", "stdin", _bounded(sys.stdin.buffer, "-", left)))
            left -= len(sources[-1].text)
            continue
        path = Path(spec)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not files:
                raise UserError(f"{path}: an empty directory; nothing to ingest")
        elif path.exists():  # a file, or what the shell hands over: /dev/stdin, <(cmd), a FIFO
            files = [path]
        else:
            raise UserError(f"{path}: no such file or directory")
        for file in files:
            try:
                with open(file, "rb") as stream:
                    text = _bounded(stream, str(file), left)
            except OSError as exc:
                raise UserError(f"{file}: cannot read: {exc.strerror or exc}") from None
            left -= len(text)
            sources.append(Source(str(file), file.name.split(".")[0] or file.name, text))
    if sources and not any(s.text.strip() for s in sources):
        names = ", ".join(s.name for s in sources)
        raise UserError(f"{names}: empty input (no output of any host in it); nothing to ingest")
    return sources


def _bounded(stream: BinaryIO, name: str, left: int) -> str:
    try:
        return read_bounded(stream, name, max(0, left))
    except IngestError as exc:
        raise UserError(str(exc)) from None


@click.command("ingest")
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="ansible-json: ANSIBLE_STDOUT_CALLBACK=json output; frames: any text holding frames "
    "(pdsh/clush `host: ` prefixes, srun output with or without --label, one file per host).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON on stdout.")
@reports_dir_option
def ingest(sources: tuple[str, ...], fmt: str, as_json: bool, reports_dir: Path) -> int:
    """Store output an engine collected (SOURCES: files, directories, or - for stdin) as a run."""
    loaded = read_sources(sources)
    try:
        outcome = ingest_sources(loaded, fmt)
    except IngestError as exc:
        raise UserError(str(exc)) from None
    source_info = {
        "paths": [s.name for s in loaded],
        "formats": sorted(set(outcome.formats)),
        "engines": sorted(set(outcome.engines)),
    }
    try:
        writer = RunWriter(reports_dir, "ingest", sys.argv, extra={"source": source_info})
        for result in outcome.results:
            writer.write_host(result)
        manifest = writer.finish()
    except StoreError as exc:  # nothing else to do while ingesting: the run is the whole job
        raise UserError(f"--reports-dir: {exc}") from None
    if as_json:
        click.echo(json.dumps(manifest.to_dict(), indent=2, sort_keys=True))
    else:
        results = ResultConsole()  # results to stdout, warnings to stderr
        results.print(summary_table(outcome.results, f"gpudiag ingest {manifest.run_id}"))
        results.print(f"results: {writer.dir}", markup=False, highlight=False)
    return ExitCode.OK if all(r.status == OK for r in outcome.results) else ExitCode.HOSTS_FAILED
