"""The store: atomic per-host documents, run.json kept current, latest, and schema refusal."""
import json
import re

import pytest

from gpudiag.models import HostResult, ProbeResult
from gpudiag.schema import SCHEMA_VERSION
from gpudiag.probe_data import fitted
from gpudiag.store import RunWriter, StoreError
from gpudiag.run_loader import load_run, read_manifest, resolve_run_dir


def result(name, status="ok"):
    return HostResult(name=name, status=status, reason="" if status == "ok" else "why",
                      probes={"env": ProbeResult("ok", 0.1, data=fitted("env", {"hostname": name}))})


def test_each_host_is_on_disk_the_moment_it_is_written(tmp_path):
    writer = RunWriter(tmp_path, "scan", ["gpudiag", "scan", "a"])
    writer.write_host(result("gpu-01"))
    # Before finish(): the host file, run.json and the journal line naming it exist (a crash keeps them).
    run = json.loads((writer.dir / "run.json").read_text())
    assert run["finished_at"] is None and run["hosts"] == []
    entry = {"name": "gpu-01", "status": "ok", "reason": "", "file": "gpu-01"}
    assert [json.loads(line) for line in (writer.dir / "hosts.journal").read_text().splitlines()] == [entry]
    assert list(read_manifest(writer.dir).hosts) == [entry]
    writer.finish()
    assert json.loads((writer.dir / "run.json").read_text())["hosts"] == [entry]   # compacted at the end
    assert not (writer.dir / "hosts.journal").exists()
    host = json.loads((writer.dir / "hosts" / "gpu-01.json").read_text())
    assert host["schema"] == SCHEMA_VERSION and host["probes"]["env"]["data"]["hostname"] == "gpu-01"
    assert (tmp_path / "latest").read_text().strip() == writer.run_id
    assert not [p for p in writer.dir.rglob(".*")]  # no temp files left


def test_interrupted_run_keeps_finished_hosts_and_lists_the_rest(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    writer.write_host(result("done"))
    writer.note_host("pending", "interrupted", "the run was interrupted")
    writer.finish(interrupted=True)
    loaded = load_run(resolve_run_dir(None, tmp_path))
    assert loaded.manifest.interrupted is True
    assert {h.name: h.status for h in loaded.hosts} == {"done": "ok", "pending": "interrupted"}


def test_unsafe_and_colliding_host_names_get_distinct_safe_files(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    a = writer.write_host(result("../etc/passwd"))
    b = writer.write_host(result("_etc_passwd"))   # same safe name, different host
    assert a.parent == b.parent == writer.dir / "hosts"
    assert a != b and not a.name.startswith(".")
    assert json.loads(a.read_text())["name"] == "../etc/passwd"
    assert json.loads(b.read_text())["name"] == "_etc_passwd"


def test_newer_schema_host_file_is_carried_as_unreadable_with_the_reason(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    path = writer.write_host(result("h"))
    writer.write_host(result("other"))
    doc = json.loads(path.read_text())
    doc["schema"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(doc))
    loaded = load_run(writer.dir)
    assert {h.name: h.status for h in loaded.hosts} == {"h": "unreadable", "other": "ok"}
    assert [u.file for u in loaded.unreadable] == ["hosts/h.json"]
    assert "schema 2 is newer" in loaded.unreadable[0].reason and loaded.unreadable[0].host == "h"


def test_resolve_run_dir_errors_name_the_path(tmp_path):
    with pytest.raises(StoreError, match="no runs yet"):
        resolve_run_dir(None, tmp_path)
    with pytest.raises(StoreError, match="nope: no run there"):
        resolve_run_dir("nope", tmp_path)
    writer = RunWriter(tmp_path, "scan", [])
    assert resolve_run_dir(writer.run_id, tmp_path) == writer.dir
    assert resolve_run_dir(str(writer.dir / "run.json"), tmp_path) == writer.dir


def test_corrupt_json_names_file_and_line(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    (writer.dir / "hosts" / "bad.json").write_text('{\n  "schema": 1,\n  oops\n}')
    loaded = load_run(writer.dir)
    assert loaded.hosts == () and len(loaded.unreadable) == 1
    assert loaded.unreadable[0].file == "hosts/bad.json"
    assert loaded.unreadable[0].reason.startswith("hosts/bad.json:3: not valid JSON") or \
        ":3: not valid JSON" in loaded.unreadable[0].reason


def stored_run(tmp_path, host_changes=None, run_changes=None):
    writer = RunWriter(tmp_path, "scan", [])
    path = writer.write_host(result("h"))
    writer.finish()
    doc = json.loads(path.read_text())
    doc.update(host_changes or {})
    path.write_text(json.dumps(doc))
    manifest = json.loads((writer.dir / "run.json").read_text())
    manifest.update(run_changes or {})
    (writer.dir / "run.json").write_text(json.dumps(manifest))
    return writer.dir


@pytest.mark.parametrize("host_changes, message", [
    ({"duration_s": "abc"}, r"'duration_s' is 'abc', not a number"),
    ({"probes": ["env"]}, r"'probes' is \['env'\], not a JSON object"),
    ({"probes": {"env": {"status": "ok", "duration_s": "x"}}}, r"probe env: 'duration_s' is 'x'"),
    ({"probes": {"env": "ok"}}, r"probe env: 'ok' is not a JSON object"),
    ({"output_tail": "text"}, r"'output_tail' is 'text'"),
])
def test_malformed_host_documents_are_unreadable_hosts(tmp_path, host_changes, message):
    loaded = load_run(stored_run(tmp_path, host_changes))
    assert [h.status for h in loaded.hosts] == ["unreadable"]
    assert re.search(message, loaded.unreadable[0].reason), loaded.unreadable[0].reason


@pytest.mark.parametrize("run_changes, message", [
    ({"hosts": "x"}, r"run\.json: 'hosts' is 'x', not a list"),
    ({"hosts": ["x"]}, r"run\.json: 'hosts' holds an entry that is not a JSON object"),
    ({"argv": 3}, r"run\.json: 'argv' is 3, not a list"),
])
def test_malformed_run_json_is_a_store_error(tmp_path, run_changes, message):
    with pytest.raises(StoreError, match=message):
        load_run(stored_run(tmp_path, None, run_changes))


def test_report_on_a_malformed_stored_document_exits_2_with_one_line(tmp_path):
    from click.testing import CliRunner
    from gpudiag.cli import cli
    run_dir = stored_run(tmp_path, None, {"argv": 3})
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--reports-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_host_names_differing_only_in_case_get_distinct_files(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    upper, lower = writer.write_host(result("GPU1")), writer.write_host(result("gpu1"))
    assert upper.name.casefold() != lower.name.casefold()   # distinct on a case-insensitive disk too
    assert {h.name for h in load_run(writer.dir).hosts} == {"GPU1", "gpu1"}


def test_atomic_text_write_leaves_no_temp_file_when_it_fails(tmp_path, monkeypatch):
    import os
    from gpudiag.store import write_text_atomic
    target = tmp_path / "latest"
    target.write_text("old\n")

    def no_space(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        write_text_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]


@pytest.mark.parametrize("code, words", [(13, "Permission denied"), (30, "Read-only file system"),
                                         (28, "No space left on device")])
def test_a_reports_dir_that_cannot_be_written_is_one_store_error(tmp_path, monkeypatch, code, words):
    import tempfile

    def refuse(*args, dir=None, **kwargs):
        raise OSError(code, words, dir)
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(StoreError, match=f"cannot create the run: {words}$"):
        RunWriter(tmp_path / "reports", "scan", [])


def test_planned_hosts_without_a_result_read_as_never_finished(tmp_path):
    from gpudiag.store import RunWriter as Writer
    writer = Writer(tmp_path, "scan", [], planned=["a", "b", "c"])
    writer.write_host(result("a"))           # then the process is killed: no finish()
    loaded = load_run(writer.dir)
    assert {h.name: h.status for h in loaded.hosts} == {"a": "ok", "b": "never_finished", "c": "never_finished"}
    assert loaded.problems()[0].startswith("incomplete: 2 of 3 hosts never finished (b, c)")


def test_temp_files_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    import os
    import subprocess
    writer = RunWriter(tmp_path, "scan", [])
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = writer.dir / "hosts" / f".h.json.{dead.pid}.tmp-abc"
    live = writer.dir / "hosts" / f".h.json.{os.getpid()}.tmp-def"
    stale.write_text("{")
    live.write_text("{")
    RunWriter(tmp_path, "scan", [])          # the next run cleans up
    assert not stale.exists() and live.exists()


def test_nan_and_infinity_are_written_as_null(tmp_path):
    writer = RunWriter(tmp_path, "scan", [])
    host = HostResult(name="h", status="ok", probes={"env": ProbeResult("ok", 0.1, data={"r": float("nan"),
                                                                                       "i": float("inf")})})
    path = writer.write_host(host)

    def refuse(name):
        raise ValueError(name)
    assert json.loads(path.read_text(), parse_constant=refuse)["probes"]["env"]["data"] == {"r": None, "i": None}


def test_a_result_file_missing_from_an_ok_host_is_result_missing(tmp_path):
    writer = RunWriter(tmp_path, "scan", [], planned=["a"])
    path = writer.write_host(result("a"))
    writer.finish()
    path.unlink()
    loaded = load_run(writer.dir)
    assert [(h.name, h.status) for h in loaded.hosts] == [("a", "result_missing")]
    assert loaded.problems() == ["a: result missing (hosts/a.json is missing (status was ok))"]
