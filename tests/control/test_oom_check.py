"""The OOM follow-up's parts: the runner's announcements kept by the capture, matching real kernel lines
(tests/fixtures/kernel_log/) by pid and start time, the verdict's words, and a follow-up that fails
without failing the host."""
import json
from pathlib import Path

from gpudiag import oom_check
from gpudiag.models import PROBE_KILLED, CommandResult, Host, HostResult
from gpudiag.oom_check import Announced, announced_processes, describe, judge
from gpudiag.transports.capture import STDERR_TAIL, BoundedCapture

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"


def lines(name):
    return [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("# ")]


def announcement(nonce, pid, role="runner", clock=100.0):
    return b"GPUDIAG-PROCESS %s %s\n" % (nonce.encode(), json.dumps({"pid": pid, "role": role, "clock_s": clock}).encode())


def test_announcements_survive_a_stderr_flood_and_split_chunks():
    capture = BoundedCapture()
    line = announcement("n1", 4242)
    capture.add_stderr(b"warning\n" + line[:10])
    capture.add_stderr(line[10:] + b"x" * (STDERR_TAIL * 3) + b"\n")
    capture.add_stderr(b"noise " + announcement("n1", 99))        # not at a line start: not an announcement
    assert [p.pid for p in announced_processes(capture.stderr, "n1")] == [4242]


def test_only_this_runs_well_formed_announcements_count():
    stderr = (announcement("other", 1) + b"GPUDIAG-PROCESS n1 {not json}\n" + announcement("n1", True)
              + announcement("n1", 7, role="child", clock="soon") + announcement("n1", 8))
    assert announced_processes(stderr, "n1") == [Announced(7, "child", None), Announced(8, "runner", 100.0)]


def test_a_child_of_the_runner_matches_and_an_earlier_kill_of_a_reused_pid_does_not():
    kern = {"source": "/var/log/kern.log", "lines": lines("kern_log_python3_reaped.log")}
    runner, child = Announced(15000, "runner", 500.0), Announced(15783, "child", 510.0)
    found = judge(kern, [runner, child])
    assert found["verdict"] == "confirmed" and found["pid"] == 15783 and found["role"] == "child"
    assert found["anon_rss_kb"] == 4288 and found["line"].startswith("Killed process 15783 (python3)")
    assert judge(kern, [Announced(15783, "runner", 600.0)]) == {"verdict": "not_found", "source": "/var/log/kern.log"}


def test_lines_without_a_kernel_clock_match_by_pid_alone():
    found = judge({"source": "dmesg", "lines": lines("dmesg_ctime_oom_kill_pair.log")}, [Announced(7899, "runner", 1e6)])
    assert found["verdict"] == "confirmed" and found["constraint"] == "CONSTRAINT_NONE"
    assert describe(found) == "oom: confirmed (kernel: Killed process 7899 (python) anon-rss 14.7 GiB)"


def test_every_verdict_in_words():
    memcg = judge({"source": "dmesg", "lines": lines("memcg_python3.log")}, [Announced(140339, "runner", None)])
    assert describe(memcg) == "oom: confirmed (kernel, memory cgroup limit: Killed process 140339 (python3) anon-rss 15.2 MiB)"
    unreadable = judge({"source": None, "reasons": ["dmesg: exit 1", "journalctl: not found"]}, [])
    assert describe(unreadable) == "oom: kernel log not readable (dmesg: exit 1; journalctl: not found)"
    inside = judge({"source": "dmesg", "lines": []}, [Announced(5, "runner", None)], in_container=True)
    assert describe(inside) == ("oom: not found in the kernel log (dmesg; the pids are the container's own; the "
                                "kernel logs the host's)")
    assert judge("garbage", [])["verdict"] == "not_readable"
    assert judge({"source": "dmesg", "lines": "not a list" * 3}, [])["verdict"] == "not_found"


class Refusing:
    def run(self, argv, stdin, timeout, output_limit=None, events=None):
        raise OSError("connection reset")


def killed_command(stderr=b""):
    return CommandResult(None, b"", stderr, 1.0, signal="SIGKILL")


def test_a_follow_up_that_cannot_run_is_the_verdicts_reason_and_the_kill_stands():
    host = Host(name="h", address="h")
    command = killed_command(announcement("n1", 77))
    oom = oom_check.follow_up(Refusing(), host, command, "n1", 30.0)
    assert oom == {"verdict": "not_readable", "reason": "the follow-up could not run: connection reset"}
    assert oom_check.follow_up(Refusing(), host, command, "n1", 1.0)["reason"] == "no time left before the host's deadline"
    assert oom_check.follow_up(Refusing(), host, killed_command(), "n1", 30.0)["reason"] == (
        "the runner was killed before it announced its pid")
    result = oom_check.attach(HostResult(name="h", status=PROBE_KILLED, reason="old"), command, oom)
    assert result.reason == ("the probe process was killed by SIGKILL on the host; the kernel's OOM killer sends "
                             "SIGKILL too, look for it in the host's kernel log; oom: kernel log not readable "
                             "(the follow-up could not run: connection reset)")
    assert HostResult.from_dict(result.to_dict()).oom == oom


def test_only_sigkill_gets_a_follow_up():
    assert oom_check.wanted(killed_command())
    assert oom_check.wanted(CommandResult(137, b"", b"", 1.0))          # a shell's report of SIGKILL
    assert not oom_check.wanted(CommandResult(None, b"", b"", 1.0, signal="SIGSEGV"))
    assert not oom_check.wanted(CommandResult(0, b"", b"", 1.0))


def test_an_announcement_is_never_quoted_as_the_hosts_last_stderr_line():
    from gpudiag.host_status import classify
    command = CommandResult(1, b"", b"real trouble\n" + announcement("n1", 5), 1.0)
    result = classify(Host(name="h", address="h"), command, "n1", 60.0)
    assert result.reason.endswith("stderr: real trouble"), result.reason
