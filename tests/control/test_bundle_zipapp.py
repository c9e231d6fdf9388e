"""The probe zipapp: reproducible bytes, standard library only, runs anywhere, leaves nothing behind."""
import glob
import json
import os
import subprocess
import sys
import zipfile

import pytest
from click.testing import CliRunner

from gpudiag import __version__
from gpudiag.bundle import probe_modules
from gpudiag.cli import cli
from gpudiag.engines import zipapp
from gpudiag.engines.frames import parse_text


def build(tmp_path, *args, name="gpudiag-probes.pyz"):
    out = tmp_path / name
    result = CliRunner().invoke(cli, ["bundle", "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return out


def run_isolated(pyz, cwd, *args):
    """`python3 -I -S`: no site-packages, no user site, no environment: the standard library only."""
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(cwd)}
    return subprocess.run([sys.executable, "-I", "-S", str(pyz), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_two_builds_give_identical_bytes(tmp_path):
    first = build(tmp_path, "--probes", "env", name="a.pyz").read_bytes()
    second = build(tmp_path, "--probes", "env", name="b.pyz").read_bytes()
    assert first == second
    assert build(tmp_path, "--probes", "env,sglang_source", name="c.pyz").read_bytes() != first


def test_archive_holds_every_probe_module_sorted_with_fixed_dates(tmp_path):
    data = zipapp.build_zipapp(["env"])
    assert data.startswith(b"#!/usr/bin/env python3\n")
    path = tmp_path / "b.pyz"
    path.write_bytes(data)
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        infos = archive.infolist()
    assert names == sorted(names) and "__main__.py" in names
    expected = {zipapp.module_path(name, is_pkg) for name, (is_pkg, _) in probe_modules().items()}
    assert expected <= set(names)
    assert {info.date_time for info in infos} == {zipapp.FIXED_DATE}


def test_bundle_runs_isolated_and_prints_one_frame(tmp_path):
    pyz = build(tmp_path, "--probes", "env")
    workdir = tmp_path / "host"
    workdir.mkdir()
    proc = run_isolated(pyz, workdir, "--host", "node7")
    assert proc.returncode == 0, proc.stderr
    (frame,) = parse_text(proc.stdout).frames
    assert frame.nonce.startswith(f"bundle-{__version__}-")
    doc = frame.document
    assert doc["host"] == "node7" and doc["hostname"]
    assert sorted(doc["probes"]) == ["deployment", "env"]       # the set chosen at build time, with its needs
    assert doc["probes"]["env"]["status"] == "ok"
    assert list(workdir.iterdir()) == []                         # nothing left in cwd or TMPDIR


def test_probes_chosen_at_run_time_and_wrapped_lines(tmp_path):
    pyz = build(tmp_path, "--probes", "env")
    proc = run_isolated(pyz, tmp_path, "--probes", "env,nosuch", "--line-width", "80",
                        "--set", "env.x=1")
    lines = proc.stdout.splitlines()
    begin = next(i for i, line in enumerate(lines) if line.startswith("GPUDIAG-BEGIN"))
    body = lines[begin + 1:-1]
    assert len(body) > 1
    assert max(len(line) for line in body) < 90     # 80, plus any spaces a cut must not end on
    doc = json.loads("".join(body))
    assert doc["probes"]["nosuch"]["status"] == "skipped"


def test_bundle_usage_errors_and_version(tmp_path):
    pyz = build(tmp_path)
    bad = run_isolated(pyz, tmp_path, "--set", "novalue")
    assert bad.returncode == 2 and "PROBE.KEY=VALUE" in bad.stderr
    version = run_isolated(pyz, tmp_path, "--version")
    assert version.stdout.strip() == f"gpudiag probe bundle {__version__}"


def test_cli_bundle_rejects_unknown_probe(tmp_path):
    result = CliRunner().invoke(cli, ["bundle", "-o", str(tmp_path / "x.pyz"), "--probes", "nosuch"])
    assert result.exit_code == 2 and "unknown probe" in result.output
    assert not (tmp_path / "x.pyz").exists()


def test_bundle_output_round_trips_through_ingest(tmp_path):
    pyz = build(tmp_path, "--probes", "env")
    out = tmp_path / "collected.out"
    out.write_text(run_isolated(pyz, tmp_path, "--host", "n1").stdout)
    result = CliRunner().invoke(cli, ["ingest", str(out), "--reports-dir", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hosts"][0]["name"] == "n1"


def older_python(version):
    found = glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}"))
    found += [p for p in (f"/usr/bin/python{version}",) if os.path.exists(p)]
    return found[0] if found else None


def test_bundle_on_python_3_9_and_a_clear_frame_on_3_8(tmp_path):
    py39, py38 = older_python("3.9"), older_python("3.8")
    if not (py39 or py38):
        pytest.skip("no Python 3.9 or 3.8 interpreter on this machine")
    pyz = build(tmp_path, "--probes", "env")
    for python, fatal in ((py39, False), (py38, True)):
        if python is None:
            continue
        proc = subprocess.run([python, "-I", "-S", str(pyz)], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        (frame,) = parse_text(proc.stdout).frames
        if fatal:
            assert "older than 3.9" in frame.document["fatal"]
        else:
            assert frame.document["probes"]["env"]["status"] == "ok"
            assert frame.document["python"]["version"].startswith("3.9.")


def test_bundle_honours_python_for_torch_work_while_its_own_process_has_no_torch(tmp_path):
    """Run with -S (no site-packages, so no torch) and --python naming a serving interpreter: torch_caps and
    copy_bench run under --python, in children; the bundle's own process never needed torch."""
    pytest.importorskip("torch")
    pyz = build(tmp_path, "--probes", "torch_caps,copy_bench")
    workdir = tmp_path / "host"
    (workdir / "proc").mkdir(parents=True)
    serving = tmp_path / "venv_sglang" / "python"
    serving.parent.mkdir()
    serving.write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)
    serving.chmod(0o755)
    proc = run_isolated(pyz, workdir, "--python", str(serving), "--set", "deployment.proc_root=%s" % (workdir / "proc"),
                        "--set", "env.torch=false", "--set", "torch_caps.cuda=false", "--set", "copy_bench.device=cpu",
                        "--set", "copy_bench.batch_sizes=[1]", "--set", "copy_bench.hidden_sizes=[64]",
                        "--set", "copy_bench.paths=[\"eagle_draft\"]", "--set", "copy_bench.samples=3",
                        "--set", "copy_bench.sweep_max_bytes=4096", "--set", "copy_bench.max_iters=5")
    assert proc.returncode == 0, proc.stderr
    (frame,) = parse_text(proc.stdout).frames
    probes = frame.document["probes"]
    chosen = probes["deployment"]["data"]["interpreter"]
    assert chosen["path"] == str(serving) and chosen["why"] == "explicit"
    caps = probes["torch_caps"]
    assert caps["status"] == "ok", caps
    assert caps["data"]["interpreter"]["path"] == str(serving) and caps["data"]["interpreter"]["ran"] == "child"
    assert caps["data"]["checks"]["cpu"]["ok"] is True
    bench = probes["copy_bench"]
    assert bench["status"] == "ok", bench
    assert bench["data"]["interpreter"]["path"] == str(serving) and bench["data"]["gpus"][0]["status"] == "ok"
    # An engine's run names no limits: the GPU probe runs under its declared 900 s, not the light probes' 120 s.
    assert bench["limit_s"] == bench["declared_s"] == 900
    out = tmp_path / "collected.out"
    out.write_text(proc.stdout)
    result = CliRunner().invoke(cli, ["ingest", str(out), "--reports-dir", str(tmp_path / "r")])
    assert result.exit_code in (0, 4), result.output
    [stored] = glob.glob(str(tmp_path / "r" / "runs" / "*" / "hosts" / "*.json"))
    assert json.load(open(stored, encoding="utf-8"))["probes"]["copy_bench"]["limit_s"] == 900
