"""`gpudiag scan` folds each host into the run it judges as the host's result is stored: once the last host is
stored nothing is read back from disk, and the findings and verdict are those of the run read back whole."""
import random

from click.testing import CliRunner

import gpudiag.cli.report  # noqa: F401 - every remembered function registered, as the CLI has them
from gpudiag.cli import cli
from gpudiag.cli.report_stream import FINDINGS_AND_VERDICT
from gpudiag.cli.scan_fold import RunFold
from gpudiag.derived import is_slim
from gpudiag.findings import all_findings
from gpudiag.render.safe_text import clean_run
from gpudiag.run_loader import load_run, read_manifest
from gpudiag.store import RunWriter
from gpudiag.verdict import verdict
from tests.control.test_report_streamed_hosts import varied_run


def test_hosts_folded_in_any_order_judge_as_the_run_read_back_whole(tmp_path):
    run_dir = varied_run(tmp_path / "run", 130)  # h000, h040, h080 and h120 agree: they share one slim copy
    manifest = read_manifest(run_dir)
    fold = RunFold(run_dir, manifest, FINDINGS_AND_VERDICT)
    files = sorted((run_dir / "hosts").iterdir())
    random.Random(7).shuffle(files)  # hosts finish in any order
    for path in files:
        fold.add(path, path.read_text(), path.stem)
    folded = fold.run(manifest)
    assert 0 < len(fold.known) < 4 and all(probes == {} for probes in fold.known.values())  # no host's data kept
    whole = clean_run(load_run(run_dir))
    assert [h.name for h in folded.hosts] == [h.name for h in whole.hosts]
    assert all(is_slim(h) for h in folded.hosts)
    twins = [h.probes for h in folded.hosts if h.name in ("h000", "h040", "h080", "h120")]
    assert all(probes is twins[0] for probes in twins) and folded.hosts[1].probes is not twins[0]
    found = all_findings(folded)
    assert found == all_findings(whole) and verdict(folded, found) == verdict(whole, found)


def test_scan_judges_the_results_it_stored_without_reading_their_files_back(tmp_path, monkeypatch):
    """Each host's file is spoilt right after it is written: a scan that read it back would call the host
    unreadable (incomplete, exit 3); the scan judges what it stored, and `gpudiag report` shows the spoilt file."""
    write = RunWriter.write_host_text

    def write_then_spoil(self, result):  # type: ignore[no-untyped-def]
        path, text = write(self, result)
        path.write_text("not the stored result")
        return path, text

    monkeypatch.setattr(RunWriter, "write_host_text", write_then_spoil)
    argv = ["scan", "localhost", "--probes", "env", "--set", "env.torch=false", "--reports-dir", str(tmp_path)]
    scanned = CliRunner().invoke(cli, argv)
    assert scanned.exit_code == 0, scanned.output
    assert "incomplete" not in scanned.output and "unreadable" not in scanned.output
    assert "results: " in scanned.output
    monkeypatch.undo()
    read_back = CliRunner().invoke(cli, ["report", "--reports-dir", str(tmp_path)])
    assert "unreadable" in read_back.output, read_back.output
