"""The OOM killer's records as kernels print them (real lines quoted in public issues, tests/fixtures/kernel_log/,
each file naming its source), and the host-side reading of a kernel log: bounded, in order, never raising."""
import os
import stat
from pathlib import Path

import pytest

from probes import kernel_log
from probes.kernel_log import OOM_MARK, parse_oom_kills, read_file_tail
from probes.log_read import run_tail

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"


def lines(name):
    text = (FIXTURES / name).read_text()
    assert text.startswith("# source: https://github.com/"), name  # every fixture says where it was quoted
    return [line for line in text.splitlines() if not line.startswith("# ")]


def by_pid(name):
    return {kill["pid"]: kill for kill in parse_oom_kills(lines(name))}


def test_a_global_kill_without_a_timestamp():
    kill = by_pid("global_python3_no_clock.log")[10245]
    assert kill["process"] == "python3" and kill["scope"] == "system"
    assert kill["anon_rss_kb"] == 3766216 and kill["total_vm_kb"] == 3983576 and kill["shmem_rss_kb"] == 4
    assert "clock_s" not in kill
    assert kill["line"].startswith("Killed process 10245 (python3) total-vm:3983576kB")


def test_the_oom_kill_line_and_its_killed_line_are_one_record():
    kills = by_pid("dmesg_ctime_oom_kill_pair.log")
    assert list(kills) == [7899]                       # the task table's row is no kill
    kill = kills[7899]
    assert kill["constraint"] == "CONSTRAINT_NONE" and kill["memcg"] == "/init.scope"
    assert kill["process"] == "python" and kill["anon_rss_kb"] == 15370088   # commas in the sizes read through
    assert "clock_s" not in kill                       # dmesg -T stamps wall-clock time, never read as seconds


def test_kern_log_lines_keep_the_kernel_clock_and_parenthesised_names():
    kills = by_pid("kern_log_python3_reaped.log")
    assert sorted(kills) == [15783, 15784, 15925]      # the oom_reaper lines are no further kills
    assert kills[15784]["clock_s"] == pytest.approx(518.050606)
    assert kills[15925]["process"] == "(resolved)"
    assert kills[15783]["anon_rss_kb"] == 4288


def test_a_memory_cgroup_kill_says_so():
    kills = by_pid("memcg_python3.log")
    assert kills[140339]["scope"] == "cgroup" and kills[140339]["process"] == "python3"
    assert kills[140339]["anon_rss_kb"] == 15596 and kills[140339]["clock_s"] == pytest.approx(18026.221140)
    assert kills[141313]["process"] == "mount"
    assert by_pid("memcg_uwsgi_invoked.log")[63214]["scope"] == "cgroup"


def test_older_kernels_formats():
    assert by_pid("old_kernel_uid_comma.log")[808340]["anon_rss_kb"] == 84704
    kills = by_pid("old_kernel_sacrifice_child.log")
    assert sorted(kills) == [89746, 89879]             # "Kill process … or sacrifice child" is the choice, not the kill
    assert kills[89746]["anon_rss_kb"] == 109819332


def test_the_marks_keep_every_oom_line_and_drop_the_rest():
    kept = [line for line in lines("memcg_uwsgi_invoked.log") if OOM_MARK.search(line)]
    assert len(kept) == 3 and not any("CPU: 4" in line for line in kept)


def test_a_hostile_line_is_cut_and_never_raises():
    long_name = "Out of memory: Killed process 12 (" + "x" * 5000 + ") total-vm:1kB"
    assert parse_oom_kills([long_name, "oom-kill:pid=notanumber", "oom-kill:" + "=" * 900, 7]) == []


def stand_in(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_command_is_read_to_its_newest_bytes_and_its_error_line(tmp_path):
    noisy = stand_in(tmp_path, "noisy", "yes line | head -c 3000000\necho last\necho 'it failed' >&2\nexit 3\n")
    code, out, err, cut, _ = run_tail([noisy], 20, max_bytes=1000)
    assert code == 3 and len(out) == 1000 and out.endswith(b"line\nlast\n") and err == "it failed" and cut == "bytes"


def test_a_hanging_command_is_killed_at_its_time_limit(tmp_path):
    hang = stand_in(tmp_path, "hang", "exec sleep 60\n")
    code, _, err, cut, _ = run_tail([hang], 0.5)
    assert code is None and err.endswith("read stopped after 0.5 s") and cut == "time"
    assert run_tail([str(tmp_path / "absent")]).error.endswith("not found")


def test_a_log_file_is_read_as_its_tail_or_says_why_not(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("old\n" * 1000 + "new\n")
    text, why = read_file_tail(str(log), max_bytes=9)  # the first line, a fragment, is left out
    assert text == "old\nnew\n" and why is None
    assert read_file_tail(str(tmp_path / "none"))[1].endswith("No such file or directory")


def test_sources_are_tried_in_order_and_each_failure_named(tmp_path, monkeypatch):
    stand_in(tmp_path, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    stand_in(tmp_path, "journalctl", "echo '-- No entries --'\n")
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/usr/bin:/bin")
    monkeypatch.setattr(kernel_log, "LOG_FILES", (str(tmp_path / "kern.log"),))
    found = kernel_log.oom_lines()
    assert found["source"] is None
    assert found["reasons"][0] == "dmesg: read kernel buffer failed: Operation not permitted"
    assert found["reasons"][1] == "journalctl -k: printed no kernel lines"
    assert found["reasons"][2].startswith(str(tmp_path / "kern.log"))
    (tmp_path / "kern.log").write_text("\n".join(lines("kern_log_python3_reaped.log")) + "\nunrelated\n")
    found = kernel_log.oom_lines()
    assert found["source"] == str(tmp_path / "kern.log") and len(found["lines"]) == 6
