"""Ingest of engine output: frames in pdsh/srun/plain text and Ansible's json, tree and ad-hoc forms."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.engines import frames
from gpudiag.engines.ingest import IngestError, Source, ingest
from gpudiag.run_loader import load_run, resolve_run_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"


def source(name):
    path = FIXTURES / name
    return Source(str(path), path.name.split(".")[0], path.read_text())


def statuses(results):
    return {r.name: r.status for r in results}


def test_pdsh_output_keeps_every_host_apart():
    outcome = ingest([source("pdsh_fleet.txt")])
    assert statuses(outcome.results) == {"h0": "ok", "h1": "ok", "h2": "frame_error",
                                         "hdown": "unreachable", "h3": "python_missing"}
    by_name = {r.name: r for r in outcome.results}
    assert "truncated" in by_name["h2"].reason
    assert "Connection refused" in by_name["hdown"].reason
    assert "/opt/venv/bin/python3" in by_name["h3"].reason
    assert by_name["h0"].transport == "pdsh" and by_name["h0"].address == "h0"
    assert by_name["h1"].probes["env"].status == "ok"
    assert outcome.engines == ["pdsh"]


def test_srun_label_output_with_wrapped_interleaved_frames():
    outcome = ingest([source("srun_label.txt")])
    assert statuses(outcome.results) == {"gpu-node01": "ok", "gpu-node02": "ok", "gpu-node03": "frame_error"}
    node2 = next(r for r in outcome.results if r.name == "gpu-node02")
    assert node2.probes["env"].data["hostname"] == "gpu-node02"
    assert node2.address == "gpu-node02" and node2.transport == "srun"


def test_plain_concatenated_output_with_a_truncated_neighbour():
    outcome = ingest([source("srun_plain.txt")])
    assert statuses(outcome.results) == {"gpu-node01": "ok", "gpu-node02": "frame_error", "gpu-node03": "ok"}


@pytest.mark.parametrize("name", ["ansible_playbook.json", "ansible_adhoc_default.txt"])
def test_ansible_outputs_map_unreachable_hosts(name):
    outcome = ingest([source(name)])
    assert statuses(outcome.results) == {"h0": "ok", "h1": "ok", "h2": "ok", "hdown": "unreachable"}
    assert outcome.formats == ["ansible-json"]
    assert all(r.transport == "ansible" for r in outcome.results)


def test_ansible_tree_directory_one_file_per_host():
    files = sorted((FIXTURES / "ansible_tree").iterdir())
    outcome = ingest([Source(str(p), p.name, p.read_text()) for p in files])
    assert statuses(outcome.results) == {"h0": "ok", "h1": "ok", "h2": "ok", "h3": "python_missing",
                                         "hdown": "unreachable"}


def test_ansible_failure_kinds_from_messages():
    doc = {"plays": [{"tasks": [{"hosts": {
        "a": {"unreachable": True, "msg": "Failed to connect to the host via ssh: root@x: Permission denied "
                                          "(publickey)."},
        "b": {"failed": True, "rc": 1, "stdout": "boom\r\n", "stderr": "", "msg": "non-zero return code"},
        "c": {"failed": True, "msg": "Could not find or access 'gpudiag-probes.pyz'"},
    }}]}], "stats": {"a": {"unreachable": 1}, "b": {"failures": 1}, "c": {"failures": 1}}}
    outcome = ingest([Source("x.json", "x", json.dumps(doc))])
    assert statuses(outcome.results) == {"a": "auth_failed", "b": "frame_error", "c": "frame_error"}
    assert "gpudiag-probes.pyz" in {r.name: r for r in outcome.results}["c"].reason


def test_the_same_host_twice_keeps_both():
    text = (FIXTURES / "srun_plain.txt").read_text().replace("gpu-node03", "gpu-node01")
    names = sorted(r.name for r in ingest([Source("a", "a", text)]).results)
    assert names == ["gpu-node01", "gpu-node01-2", "gpu-node02"]


def test_any_nonce_and_crlf_lines():
    body = json.dumps({"schema": 1, "host": "n1", "probes": {"env": {"status": "ok", "data": {"x": 1}}}})
    text = f"banner\r\nGPUDIAG-BEGIN whatever-nonce\r\n{body}\r\nGPUDIAG-END whatever-nonce\r\n"
    parsed = frames.parse_text(text)
    assert [f.nonce for f in parsed.frames] == ["whatever-nonce"]
    assert parsed.frames[0].document["host"] == "n1"


def test_unmatched_end_and_bad_json_never_crash():
    text = "GPUDIAG-END x\nGPUDIAG-BEGIN y\n{not json\nGPUDIAG-END y\n"
    (result,) = ingest([Source("f.out", "f", text)]).results
    assert result.status == "frame_error" and "JSON" in result.reason and result.name == "f"


def test_text_without_any_frame_is_an_error():
    with pytest.raises(IngestError, match="no gpudiag frame"):
        ingest([Source("notes.txt", "notes", "")])


def test_cli_ingest_stores_a_run_report_can_read(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(FIXTURES / "pdsh_fleet.txt"), "--reports-dir", str(tmp_path),
                                 "--json"])
    assert result.exit_code == 3, result.output
    manifest = json.loads(result.stdout)
    assert manifest["kind"] == "ingest"
    assert manifest["source"]["engines"] == ["pdsh"]
    assert manifest["source"]["paths"] == [str(FIXTURES / "pdsh_fleet.txt")]
    run = load_run(resolve_run_dir(None, tmp_path))
    assert {h.name: h.status for h in run.hosts}["hdown"] == "unreachable"
    assert run.manifest.kind == "ingest"


def test_cli_ingest_directory_of_per_host_files(tmp_path):
    outdir = tmp_path / "collected"
    outdir.mkdir()
    shutil.copy(FIXTURES / "srun_plain.txt", outdir / "batch1.out")
    shutil.copy(FIXTURES / "srun_label.txt", outdir / "batch2.out")
    result = CliRunner().invoke(cli, ["ingest", str(outdir), "--reports-dir", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 3
    names = [h["name"] for h in json.loads(result.stdout)["hosts"]]
    assert len(names) == 6 and len(set(names)) == 6


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/out.txt"], "no such file or directory"),
    (["--format", "ansible-json", str(FIXTURES / "pdsh_fleet.txt")], "json callback"),
])
def test_cli_ingest_bad_input_is_one_line(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["ingest", *args, "--reports-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_report_reads_an_ingested_run_unchanged(tmp_path):
    runner = CliRunner()
    stored = runner.invoke(cli, ["ingest", str(FIXTURES / "srun_plain.txt"), "--reports-dir", str(tmp_path)])
    assert stored.exit_code == 3
    report = runner.invoke(cli, ["report", "--json", "--reports-dir", str(tmp_path)])
    assert report.exit_code in (0, 1, 3), report.output
    assert "gpu-node02" in report.output and "frame_error" in report.output


def test_cli_ingest_from_stdin(tmp_path):
    text = (FIXTURES / "srun_label.txt").read_text()
    result = CliRunner().invoke(cli, ["ingest", "-", "--reports-dir", str(tmp_path), "--json"], input=text)
    assert result.exit_code == 3
    manifest = json.loads(result.stdout)
    assert manifest["source"] == {"paths": ["-"], "formats": ["frames"], "engines": ["srun"]}
    assert {h["name"] for h in manifest["hosts"]} == {"gpu-node01", "gpu-node02", "gpu-node03"}
