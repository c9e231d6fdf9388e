"""`gpudiag ingest` reads within bounds, under a memory limit: `/dev/zero` and a 256 MiB file are refused with
one line, fast, after reading just past the bound; a JSON document over a frame's value limit is refused the
same way. Each run is a subprocess with RLIMIT_AS set, so a reader without a bound fails the test by memory."""
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1536 * 2**20   # address space for the whole CLI: imports included, far under what an unbounded read costs


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def ingest(*args, stdin=subprocess.DEVNULL):
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "ingest", *map(str, args)], capture_output=True, text=True,
                          timeout=120, preexec_fn=limited, stdin=stdin, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return proc, time.monotonic() - started


def one_line_error(proc):
    lines = proc.stderr.strip().splitlines()
    return proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr


def test_dev_zero_stops_at_the_bound_with_one_line(tmp_path):
    proc, took = ingest("/dev/zero", "--reports-dir", tmp_path)
    assert one_line_error(proc), proc.stderr[-2000:]
    assert "/dev/zero: over 64 MiB" in proc.stderr and took < 30


def test_a_256_mib_file_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "collected.txt"
    with open(big, "wb") as out:
        out.truncate(256 * 2**20)          # sparse: costs no disk
    proc, took = ingest(big, "--reports-dir", tmp_path / "r")
    assert one_line_error(proc), proc.stderr[-2000:]
    assert f"{big}: over 64 MiB" in proc.stderr and took < 30


def test_stdin_is_bounded_too(tmp_path):
    with open("/dev/zero", "rb") as zero:
        proc, _ = ingest("-", "--reports-dir", tmp_path, stdin=zero)
    assert one_line_error(proc) and "-: over 64 MiB" in proc.stderr, proc.stderr[-2000:]


def test_the_sources_together_are_bounded(tmp_path, monkeypatch):
    from gpudiag.cli import engines
    from gpudiag.cli import UserError
    for number in range(3):
        (tmp_path / f"h{number}.txt").write_text("x" * 1000)
    monkeypatch.setattr(engines, "MAX_TOTAL_BYTES", 2500)
    with pytest.raises(UserError, match="the sources together"):
        engines.read_sources((str(tmp_path),))


def test_a_json_document_over_a_frames_value_limit_is_refused(tmp_path):
    dense = tmp_path / "ansible.json"
    dense.write_text(json.dumps({"plays": [{"tasks": [{"hosts": {"h": {"stdout": "", "rc": 0}}}]}],
                                 "pad": [0] * 1_200_000}))
    proc, _ = ingest(dense, "--reports-dir", tmp_path / "r")
    assert one_line_error(proc), proc.stderr[-2000:]
    assert "values" in proc.stderr or "limit" in proc.stderr


def test_a_log_whose_tail_is_empty_lines_is_cheap_in_repro_log(tmp_path):
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        out.write(b"[2026-01-01 00:00:00] INFO server started\n" + b"\n" * (12 * 2**20))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "repro", "cuda-graph-crash", "--log", str(log),
                           "--reports-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=120,
                          preexec_fn=limited, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    took = time.monotonic() - started
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1, 2, 4), proc.stderr[-2000:]
    assert took < 20, f"{took:.1f} s for a log of empty lines"


def test_last_lines_keeps_the_newest_lines_and_collapses_only_long_blank_runs():
    from probes.log_window import last_lines
    # short blank runs stay: a crash is quoted with the log's own line numbers
    assert last_lines("a\n\n \t\nb\r\n\r\nc\n") == ("a\n\n \t\nb\n\nc\n", False)
    assert last_lines("a\n" + "\n" * 1000 + "x") == ("a\n\nx", True)
    assert last_lines("".join(f"{n}\n" for n in range(10)), 3) == ("7\n8\n9\n", True)
