"""What `gpudiag scan` derived of each host, kept beside the host's file (gpudiag/derived_files.py): `gpudiag
report` reads it instead of the host file, with the same output byte for byte, and only when its seal, the code
that derived it and the host file it was derived from all check out."""
import dataclasses
import json
import os
import stat

import pytest
from click.testing import CliRunner

import gpudiag.cli.report  # noqa: F401 - every remembered function registered, as the CLI has them
import gpudiag.run_loader
from gpudiag import derived_files
from gpudiag.cli import cli
from gpudiag.cli.report_stream import CHUNK, FINDINGS_AND_VERDICT, derivation_args, streamed_run
from gpudiag.cli.scan_fold import RunFold
from gpudiag.derived import REMEMBERED, is_slim
from gpudiag.render.safe_text import clean_run
from gpudiag.run_loader import read_manifest
from gpudiag.run_records import LoadedRun
from gpudiag.user_key import user_key
from tests.control.test_report_streamed_hosts import report, varied_run

ALL = frozenset(REMEMBERED)


def args_of(run_dir):
    """The remembered functions' other arguments for `run_dir`'s hosts, as the report gives them (no charts)."""
    return derivation_args(clean_run(LoadedRun(path=run_dir, manifest=read_manifest(run_dir), hosts=())), {})


def folded(run_dir):
    """Each host file of `run_dir` folded as `gpudiag scan` folds a host it has just stored: what it derived
    is kept beside the file."""
    fold = RunFold(run_dir, read_manifest(run_dir), FINDINGS_AND_VERDICT)
    for path in sorted((run_dir / "hosts").glob("*.json")):
        fold.add(path, path.read_text(), path.stem)
    return fold


@pytest.fixture(scope="module")
def kept_fleet(tmp_path_factory):
    run_dir = varied_run(tmp_path_factory.mktemp("kept") / "run", 2 * CHUNK + 20)  # three chunks
    folded(run_dir)
    return run_dir


def outputs(run_dir, out, env=None):
    """The markdown report and its appendix, the JSON and the console report, through the CLI."""
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        md = report(run_dir, "--no-charts", "-o", str(out / "r.md"))
        as_json, console = report(run_dir, "--json"), report(run_dir)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return [(r.returncode, r.stdout) for r in (md, as_json, console)] + [
        (out / "r.md").read_text(), (out / "r.appendix.md").read_text()]


def test_reports_read_from_kept_hosts_are_those_read_from_the_host_files(kept_fleet, tmp_path):
    kept = sorted(p.stem for p in (kept_fleet / "hosts" / ".derived").iterdir())
    # Hosts derived once for a stand-in as the scan folded them are not kept: h000's twins (h040, h080, h120), and
    # the hosts after h002 read from gpu-c, whose probe data has no measured value to vary: they agree.
    alone = {f"h{n:03d}" for n in range(2 * CHUNK + 20) if n % 40 and n % 3 != 2} | {"h000", "h002"}
    assert kept == sorted(alone)
    assert outputs(kept_fleet, tmp_path / "kept") == outputs(kept_fleet, tmp_path / "read",
                                                             {"GPUDIAG_DERIVED_FILES": "0"})
    run, _ = streamed_run(kept_fleet, derive=ALL)
    assert all(is_slim(h) for h in run.hosts) and [h.name for h in run.hosts][:3] == ["h000", "h001", "h002"]


def test_kept_hosts_are_read_in_place_of_their_files_and_the_others_files_are_read(kept_fleet, monkeypatch):
    files = sorted((kept_fleet / "hosts").glob("*.json"))
    hosts = derived_files.kept_hosts(files, {p.stem: p.stem for p in files}, ALL, args_of(kept_fleet))
    assert [h.name for h in hosts[:5] if h] == ["h000", "h001", "h002", "h003", "h004"] and hosts[5] is None
    assert all(is_slim(h) for h in hosts if h)
    import gpudiag.cli.report_stream as report_stream
    read = []
    monkeypatch.setattr(report_stream, "read_hosts", lambda part, owners: read.append(part) or real(part, owners))
    real = gpudiag.run_loader.read_hosts
    run, _ = streamed_run(kept_fleet, derive=ALL)
    assert sorted(p.stem for part in read for p in part) == [p.stem for p, h in zip(files, hosts) if h is None]
    assert [h.name for h in run.hosts] == [p.stem for p in files]


def test_the_report_uses_what_was_kept(tmp_path):
    """A kept host that says something else than its file (sealed with this user's key) is what the report shows:
    the host file is not read again."""
    argv = ["scan", "localhost", "--probes", "env", "--set", "env.torch=false", "--reports-dir", str(tmp_path)]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    [run_dir] = (tmp_path / "runs").iterdir()
    [path] = (run_dir / "hosts").glob("*.json")
    [host] = derived_files.kept_hosts([path], {path.stem: "localhost"}, ALL, args_of(run_dir))
    assert host is not None
    assert host.name == "localhost" and host.status == "ok"
    derived_files.keep(path, path.read_text(), dataclasses.replace(host, status="failed"), ALL, args_of(run_dir))
    shown = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["report", "--reports-dir", str(tmp_path)])
    assert shown.exit_code == 3 and "│ localhost │ failed │" in shown.output  # as kept, not as the file says
    os.environ["GPUDIAG_DERIVED_FILES"] = "0"
    try:
        read = CliRunner(env={"COLUMNS": "200"}).invoke(cli, ["report", "--reports-dir", str(tmp_path)])
    finally:
        del os.environ["GPUDIAG_DERIVED_FILES"]
    assert read.exit_code == 0 and "│ localhost │ ok     │" in read.output


def one_kept(tmp_path):
    run_dir = varied_run(tmp_path / "run", 2)
    folded(run_dir)
    path = run_dir / "hosts" / "h001.json"
    assert kept(path) != [None]
    return path


def spoil_host_file(path, monkeypatch):
    path.write_text(path.read_text().replace('"h001-', '"h001x-', 1))


def spoil_seal(path, monkeypatch):
    kept = derived_files.kept_path(path)
    blob = bytearray(kept.read_bytes())
    blob[-1] ^= 1
    kept.write_bytes(bytes(blob))


def other_key(path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_STATE", str(path.parent / "another-user"))
    assert user_key(create=True) is not None


def other_code(path, monkeypatch):
    monkeypatch.setattr(derived_files, "CODE", bytes(32))


def other_checks_asked(path, monkeypatch):
    """run.json says other checks were asked for than when the host was derived (its unmet checks differ)."""
    run_json = path.parent.parent / "run.json"
    doc = json.loads(run_json.read_text())
    run_json.write_text(json.dumps(dict(doc, requested={"checks": ["cuda_graph"]})))


def no_key(path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_STATE", str(path.parent / "nobody"))


def switched_off(path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_DERIVED_FILES", "0")


def host_file_a_fifo(path, monkeypatch):
    """A FIFO where the host file was: reading it would block until a writer came (none will)."""
    path.unlink()
    os.mkfifo(path)


def kept_file_a_fifo(path, monkeypatch):
    derived_files.kept_path(path).unlink()
    os.mkfifo(derived_files.kept_path(path))


def kept_file_too_large(path, monkeypatch):
    monkeypatch.setattr(derived_files, "MOST_KEPT_BYTES", 1024)


def kept(path, owners=None, keys=ALL):
    run_dir = path.parent.parent
    return derived_files.kept_hosts([path], {"h001": "h001"} if owners is None else owners, keys, args_of(run_dir))


@pytest.mark.parametrize("spoil", [spoil_host_file, spoil_seal, other_key, other_code, other_checks_asked, no_key,
                                   switched_off, host_file_a_fifo, kept_file_a_fifo, kept_file_too_large])
def test_a_kept_host_is_used_only_when_everything_checks_out(tmp_path, monkeypatch, spoil):
    path = one_kept(tmp_path)
    spoil(path, monkeypatch)
    assert kept(path) == [None]


def test_a_kept_host_is_used_only_for_the_host_run_json_gives_its_file_and_what_it_holds(tmp_path):
    path = one_kept(tmp_path)
    assert kept(path, {"h001": "h002"}) == [None]
    assert kept(path, {}) != [None]  # a file run.json does not list: read as the host it names
    assert kept(path, keys=ALL | {"a.function.not.derived"}) == [None]


def test_the_report_reads_the_host_files_when_it_draws_charts(kept_fleet, monkeypatch):
    monkeypatch.setattr(derived_files, "kept_hosts", lambda *_: pytest.fail("kept hosts read for a charted report"))
    run, _ = streamed_run(kept_fleet, charts_dir=kept_fleet.parent / "charts", derive=ALL)
    assert len(run.hosts) == 2 * CHUNK + 20


def test_an_unreadable_host_is_not_kept(tmp_path):
    run_dir = varied_run(tmp_path / "run", 2)
    (run_dir / "hosts" / "h001.json").write_text('{"schema": 1, "name": "someone-else", "status": "ok"}')
    fold = folded(run_dir)
    assert [u.file for u in fold.unreadable] == ["hosts/h001.json"]
    assert not derived_files.kept_path(run_dir / "hosts" / "h001.json").exists()
    assert derived_files.kept_path(run_dir / "hosts" / "h000.json").exists()


def test_the_key_is_this_users_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_STATE", str(tmp_path / "state"))
    key = user_key(create=True)
    path = tmp_path / "state" / "derived.key"
    assert key is not None and len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert user_key(create=True) == key and os.listdir(path.parent) == ["derived.key"]  # made once, no temp left
    for name, spoil in [("readable", lambda d: os.chmod(d / "derived.key", 0o640)),  # anyone could seal
                        ("open-dir", lambda d: os.chmod(d, 0o777)),  # anyone could swap the key file
                        ("fifo", lambda d: os.mkfifo(d / "derived.key")),  # reading it would block
                        ("missing", lambda d: None)]:
        folder = tmp_path / name
        folder.mkdir(mode=0o700)
        if name != "fifo":
            (folder / "derived.key").write_bytes(os.urandom(32)) if name != "missing" else None
        spoil(folder)
        monkeypatch.setenv("GPUDIAG_STATE", str(folder))
        assert user_key(create=False) is None, name


def test_a_broken_key_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_STATE", str(tmp_path))
    os.chmod(tmp_path, 0o700)
    (tmp_path / "derived.key").write_bytes(b"")  # a crash between making and writing it
    os.chmod(tmp_path / "derived.key", 0o600)
    assert user_key(create=False) is None
    key = user_key(create=True)
    assert key is not None and (tmp_path / "derived.key").read_bytes() == key


def test_a_result_that_cannot_be_kept_costs_the_scan_nothing(tmp_path, monkeypatch):
    """A remembered result that cannot be pickled is kept as objects in memory (gpudiag/derived.py): it is not
    kept on disk, and the fold goes on."""
    run_dir = varied_run(tmp_path / "run", 2)
    import threading

    from gpudiag.derived import REMEMBERED as registry
    key = "gpudiag.findings.facts.host_facts"
    monkeypatch.setitem(registry, key, lambda host, *_: threading.Lock())
    fold = folded(run_dir)
    assert len(fold.hosts) == 2 and not (run_dir / "hosts" / ".derived").exists()


def test_files_that_are_not_host_results_keep_their_place_among_kept_hosts(tmp_path, monkeypatch):
    run_dir = varied_run(tmp_path / "run", 6)
    folded(run_dir)
    (run_dir / "hosts" / "h002.json").write_text("{broken")  # run.json gives it to h002: an unreadable host
    (run_dir / "hosts" / "h003.txt").write_text("notes")  # no host's: read as unreadable, no host
    (run_dir / "hosts" / "h00a.json").write_bytes((run_dir / "hosts" / "h001.json").read_bytes())  # a stray copy
    kept = streamed_run(run_dir, derive=ALL)[0]
    monkeypatch.setenv("GPUDIAG_DERIVED_FILES", "0")
    read = streamed_run(run_dir, derive=ALL)[0]
    assert [(h.name, h.status) for h in kept.hosts] == [(h.name, h.status) for h in read.hosts]
    assert [h.name for h in kept.hosts] == ["h000", "h001", "h001", "h002", "h003", "h004", "h005"]
    assert kept.unreadable == read.unreadable and {u.file for u in kept.unreadable} == {"hosts/h002.json",
                                                                                       "hosts/h003.txt"}


def test_a_killed_writers_temp_file_beside_the_kept_hosts_is_removed(tmp_path):
    from gpudiag.atomic_files import remove_stale_temp_files

    kept_dir = tmp_path / "runs" / "r" / "hosts" / ".derived"
    kept_dir.mkdir(parents=True)
    dead = subprocess_pid_that_ended()
    leftover, live = kept_dir / f".h0.pickle.{dead}.tmp-1", kept_dir / f".h1.pickle.{os.getpid()}.tmp-1"
    leftover.write_bytes(b"half"), live.write_bytes(b"being written")
    assert remove_stale_temp_files(tmp_path) == [leftover] and live.exists()


def subprocess_pid_that_ended():
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)
