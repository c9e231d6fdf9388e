"""Log reads bounded by time as well as bytes and lines (probes/log_read.py): a FIFO no writer opens, a writer
that trickles forever and a command that never ends all stop at the deadline, and a tail of 8 MiB of blank
lines is read under a small address-space limit; through the CLI, `repro --log FIFO` and `serving --log FIFO`
return at GPUDIAG_LOG_READ_SECONDS with a line that says the read was cut by time."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes import log_read
from tests.process_groups import end_groups

REPO = Path(__file__).resolve().parents[2]
DECODE = "[2026-01-01 00:00:00 TP0] Decode batch. #running-req: 1, #token: 10, gen throughput (token/s): 50.0"


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "server.log"
    os.mkfifo(path)
    return path


@pytest.fixture
def group():
    """Processes a test starts in their own process group; the group is killed by its id afterwards."""
    started = []
    yield started
    end_groups(started)


def trickle(fifo, group, line=DECODE):
    """A writer that opens the FIFO and writes one line every 0.1 s, forever."""
    proc = subprocess.Popen(
        ["sh", "-c", 'while :; do echo "$0"; sleep 0.1; done > "$1"', line, str(fifo)], start_new_session=True
    )
    group.append(proc)
    return proc


def test_a_fifo_no_writer_opens_stops_at_the_deadline(fifo):
    started = time.monotonic()
    found = log_read.read_log(str(fifo), seconds=0.5)
    assert found.cut == "time" and found.text == "" and found.bytes_read == 0
    assert time.monotonic() - started < 10  # not forever: an open without O_NONBLOCK would wait for a writer
    assert log_read.cut_note(found) == "read stopped after 0.5 s"


def test_a_fifo_whose_writer_closes_is_read_whole(fifo):
    writer = subprocess.Popen(["sh", "-c", 'printf "one\\ntwo\\n" > "$0"', str(fifo)])
    found = log_read.read_log(str(fifo), seconds=20)
    writer.wait(timeout=10)
    assert found.text == "one\ntwo\n" and found.cut is None and not found.truncated


def test_a_writer_that_trickles_forever_is_cut_by_time_with_what_came(fifo, group):
    trickle(fifo, group)
    found = log_read.read_log(str(fifo), seconds=1.0)
    assert found.cut == "time" and found.truncated
    assert DECODE in found.text


def test_a_command_that_never_ends_has_its_group_killed(tmp_path):
    # The shell prints its own pid and a background child's, then waits forever.
    found = log_read.run_tail(["sh", "-c", "echo $$; sleep 300 & echo $!; wait"], seconds=1.0)
    assert found.cut == "time" and found.code is None and found.error == "sh: read stopped after 1 s"
    pids = [int(word) for word in found.data.split()]
    assert len(pids) == 2
    for pid in pids:
        assert gone(pid), f"pid {pid} outlived the read"


def gone(pid, wait_s=10.0):
    """Whether `pid` has ended (no such process, or a zombie left for its new parent to reap)."""
    ends = time.monotonic() + wait_s
    while time.monotonic() < ends:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_a_command_keeps_its_newest_bytes_and_exit_status():
    found = log_read.run_tail(["sh", "-c", "yes line | head -c 300000; echo last; echo failed >&2; exit 3"], 20, 1000)
    assert found.code == 3 and found.cut == "bytes" and len(found.data) == 1000
    assert found.data.endswith(b"line\nlast\n") and found.error == "failed"
    merged = log_read.run_tail(["sh", "-c", "echo out; echo err >&2"], 20, merge_stderr=True)
    assert merged.code == 0 and merged.data == b"out\nerr\n" and merged.error is None


def test_a_regular_file_is_read_as_its_last_bytes_and_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("old line\n" * 1000 + "new line\n")
    tail = log_read.read_log(str(log), max_bytes=12)  # "ne\nnew line\n": the fragment is left out
    assert tail.text == "new line\n" and tail.cut == "bytes"
    lines = log_read.read_log(str(log), max_lines=3)
    assert lines.text == "old line\nold line\nnew line\n" and lines.cut == "lines"
    with pytest.raises(IsADirectoryError):
        log_read.read_log(str(tmp_path))


def test_eight_mib_of_blank_lines_are_read_under_a_small_address_space_limit(tmp_path):
    log = tmp_path / "blank.log"
    with open(log, "wb") as fh:
        fh.write((DECODE + "\n").encode() * 1000)
        fh.write(b"\n" * (8 * 1024 * 1024) + b" \r\n" * (1024 * 1024))
    # One unbounded regex match over the blank run needed about 1 GiB; the bounded passes need a few MiB.
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (256 * 2**20, 256 * 2**20))\n"
        "from probes.log_read import read_log\n"
        "found = read_log(sys.argv[1], 20)\n"
        "print(repr(found.text), found.cut)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", code, str(log)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["'\\n\\n'", "bytes"]


def test_the_time_bound_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(log_read.SECONDS_ENV, "1.5")
    assert log_read.read_seconds() == 1.5
    for bad in ("", "soon", "0", "-3", "nan"):
        monkeypatch.setenv(log_read.SECONDS_ENV, bad)
        assert log_read.read_seconds() == log_read.CLI_SECONDS


def gpudiag(*args, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), GPUDIAG_LOG_READ_SECONDS="1")
    started = time.monotonic()
    done = subprocess.run(
        ["gpudiag", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False
    )
    return done, time.monotonic() - started


@pytest.mark.parametrize("command", [["repro", "cuda-graph-crash"], ["serving"]])
def test_the_cli_says_a_fifo_with_no_writer_was_cut_by_time(command, fifo, tmp_path):
    done, took = gpudiag(*command, "--log", str(fifo), tmp_path=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--log {fifo}: nothing read: read stopped after 1 s (GPUDIAG_LOG_READ_SECONDS" in done.stderr
    assert took < 60  # the 20 s default would not apply, and no wait for a writer


@pytest.mark.parametrize("command", [["repro", "cuda-graph-crash"], ["serving"]])
def test_the_cli_reads_a_trickling_fifo_until_its_time_and_says_so(command, fifo, tmp_path, group):
    trickle(fifo, group)
    done, _ = gpudiag(*command, "--log", str(fifo), tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{fifo}: read stopped after 1 s (GPUDIAG_LOG_READ_SECONDS=SECONDS gives it longer)" in done.stdout
    assert "(the last 8 MiB)" not in done.stdout


def fake_proc(tmp_path, cgroup="0::/system.slice/sglang.service\n"):
    base = tmp_path / "proc" / "4242"
    (base / "fd").mkdir(parents=True)
    (base / "cgroup").write_text(cgroup)
    for fd in (1, 2):
        os.symlink("pipe:[123456]", base / "fd" / str(fd))
    return str(tmp_path / "proc")


def test_a_hosts_server_log_reads_share_one_time_limit(tmp_path, fifo, monkeypatch):
    from probes.crashlog import serverlog

    # The server's unit has a journal that never ends; the inventory may name a FIFO nobody writes.
    journalctl = tmp_path / "bin" / "journalctl"
    journalctl.parent.mkdir()
    journalctl.write_text(f'#!/bin/sh\necho "{DECODE}"\nexec sleep 300\n')
    journalctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{journalctl.parent}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    record = serverlog.read_server_logs([{"pid": 4242}], fake_proc(tmp_path), None, seconds=1.0)["4242"]
    assert time.monotonic() - started < 30
    assert record["source"]["where"] == "journalctl -u sglang.service"
    assert record["cut"] == "time" and record["cut_note"].startswith("read stopped after ")
    assert record["serving"]["decode_lines"] == 1
    # The FIFO takes the whole limit: the journal after it is not read, and the reason says both.
    started = time.monotonic()
    spent = serverlog.read_server_logs([{"pid": 4242}], fake_proc(tmp_path / "f"), str(fifo), seconds=0.5)["4242"]
    assert time.monotonic() - started < 30
    assert spent["source"] is None, spent
    assert "server.log: read stopped after 0.5 s, nothing read" in spent["reason"]
    assert "not read: the time for reading server logs ran out" in spent["reason"]


def test_a_server_log_read_in_part_says_so_in_its_findings():
    from gpudiag.findings.server_logs import server_log_findings
    from gpudiag.models import HostResult, ProbeResult
    from probes.crashlog.classify import classify

    corpus = REPO / "tests" / "fixtures" / "logs" / "corpus" / "sglang_5285_capture_oom_deepep.log"
    text = "\n".join(line for line in corpus.read_text().splitlines() if not line.startswith("#fixture ")) + "\n"
    block = dict(classify(text, None, None), source={"kind": "journal", "where": "journalctl -u sglang.service"})
    block.update(cut="time", cut_note="read stopped after 10 s")
    host = HostResult(
        name="h",
        status="ok",
        probes={"deployment": ProbeResult(status="ok", data={"servers": [], "server_logs": {"4242": block}})},
    )
    files = [e.file for f in server_log_findings([host]) for e in f.evidence if e.file]
    assert files and all(
        f == "server pid 4242 log (journalctl -u sglang.service; read stopped after 10 s)" for f in files
    )
