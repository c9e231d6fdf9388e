"""Where the host probe finds a live server's log (probes/crashlog/serverlog.py), against a fake /proc
tree and a fake command runner; the real /proc path is covered by tests/integration/test_server_log_scan.py."""
import os
from pathlib import Path

from probes.crashlog import serverlog

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
OOM = "\n".join(l for l in (CORPUS / "sglang_5285_capture_oom_deepep.log").read_text().splitlines()
                if not l.startswith("#fixture ")) + "\n"


def fake_proc(tmp_path, pid=4242, stdout=None, stderr=None, cgroup="0::/user.slice/session-1.scope\n"):
    base = tmp_path / "proc" / str(pid)
    (base / "fd").mkdir(parents=True)
    (base / "cgroup").write_text(cgroup)
    for fd, target in ((1, stdout), (2, stderr)):
        os.symlink(str(target) if target else "pipe:[123456]", str(base / "fd" / str(fd)))
    return str(tmp_path / "proc")


def no_commands(argv, timeout=None):
    raise AssertionError("no command should run: %r" % (argv,))


def test_stdout_file_is_read_and_classified(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(OOM)
    proc = fake_proc(tmp_path, stdout=log, stderr=log)
    record = serverlog.read_one({"pid": 4242, "args": {}}, proc, None, no_commands)
    assert record["source"] == {"kind": "stdout", "where": "/proc/4242/fd/1", "path": str(log)}
    assert record["crashes"][0]["family"] == "oom_in_capture" and record["bytes_read"] == len(OOM)
    assert OOM.splitlines()[1] not in repr(record)      # only matched lines travel


def test_only_the_last_8_mib_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(serverlog, "TAIL_BYTES", 4096)
    log = tmp_path / "big.log"
    log.write_text("x" * 100 + "\n" + "[2026-01-01 00:00:00 TP0] Decode batch.\n" * 2000 + OOM)
    record = serverlog.read_one({"pid": 4242}, fake_proc(tmp_path, stdout=log), None, no_commands)
    assert record["truncated"] is True and record["bytes_read"] <= 4096
    assert record["crashes"][0]["family"] == "oom_in_capture"


def test_the_inventory_wins_and_can_name_a_journal_unit_or_a_container(tmp_path):
    calls = []

    def run(argv, timeout=None):
        calls.append(argv)
        return {"ok": True, "stdout": OOM, "stderr": "", "error": None}
    proc = fake_proc(tmp_path)
    journal = serverlog.read_one({"pid": 4242}, proc, "journal:sglang.service", run)
    assert journal["source"]["where"] == "journalctl -u sglang.service"
    docker = serverlog.read_one({"pid": 4242}, proc, "docker:sglang-0", run)
    assert docker["source"]["where"] == "docker logs sglang-0"
    assert calls[0][:3] == ["journalctl", "-u", "sglang.service"] and calls[1][:2] == ["docker", "logs"]
    assert docker["crashes"][0]["signature"]["name"] == "oom_during_capture"
    refused = serverlog.read_one({"pid": 4242}, proc, "docker:--privileged", no_commands)
    assert refused["source"] is None and "not a container name" in refused["reason"]


def test_a_log_file_flag_and_the_systemd_unit_are_found(tmp_path):
    log = tmp_path / "flag.log"
    log.write_text(OOM)
    proc = fake_proc(tmp_path)
    flagged = serverlog.read_one({"pid": 4242, "args": {"log_file": str(log)}}, proc, None, no_commands)
    assert flagged["source"] == {"kind": "flag", "where": "--log-file", "path": str(log)}
    units = []

    def run(argv, timeout=None):
        units.append(argv[2])
        return {"ok": True, "stdout": "[2026-01-01 00:00:00] The server is fired up and ready to roll!\n",
                "stderr": "", "error": None}
    unit_proc = fake_proc(tmp_path / "u", cgroup="0::/system.slice/sglang-eagle.service\n")
    record = serverlog.read_one({"pid": 4242}, unit_proc, None, run)
    assert units == ["sglang-eagle.service"] and record["outcome"] == "clean" and record["ready_line"] == 1
    assert record["source"]["found_by"] == "cgroup"


def test_no_log_says_why_for_each_place_looked(tmp_path):
    record = serverlog.read_one({"pid": 4242}, fake_proc(tmp_path), None, no_commands)
    assert record["source"] is None and record["outcome"] is None
    assert record["reason"].startswith("no log found: stdout is pipe, stderr is pipe; not in a systemd unit")
    assert record["reason"].endswith("name it with server_log: in the inventory")
    missing = serverlog.read_one({"pid": 4242}, fake_proc(tmp_path / "m"), str(tmp_path / "gone.log"), no_commands)
    assert "gone.log: No such file or directory" in missing["reason"]


def test_a_server_in_a_container_on_this_host_is_read_through_its_engine(tmp_path):
    calls = []

    def run(argv, timeout=None):
        calls.append(argv)
        return {"ok": True, "stdout": "", "stderr": OOM, "error": None}   # the container's stderr
    cid = "4f3c2a1b9e8d7c6b5a4f3c2a1b9e8d7c6b5a4f3c2a1b9e8d7c6b5a4f3c2a1b9e8d"[:64]
    proc = fake_proc(tmp_path, cgroup="0::/system.slice/docker-%s.scope\n" % cid)
    record = serverlog.read_one({"pid": 4242}, proc, None, run)
    assert calls == [["docker", "logs", "--tail", str(serverlog.JOURNAL_LINES), cid]]
    assert record["source"]["kind"] == "docker" and record["crashes"][0]["family"] == "oom_in_capture"


def test_advice_falls_back_to_the_release_installed_for_the_servers_python(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / "python3.11" / "site-packages" / "sglang-0.5.23.dist-info").mkdir(parents=True)
    log = tmp_path / "gloo.log"
    # The log itself does not say which release wrote it (sglang #5883's one line).
    log.write_text("Exception: Capture cuda graph failed: [/pytorch/third_party/gloo/gloo/transport/tcp/"
                   "unbound_buffer.cc:133] Timed out waiting 1800000ms for send operation to complete\n")
    server = {"pid": 4242, "python": str(venv / "bin" / "python3"), "same_root": True}
    record = serverlog.read_one(server, fake_proc(tmp_path, stdout=log), None, no_commands)
    assert record["release"]["release"] == "0.5.23" and record["advice_assumes"] == "sglang 0.5.23 (0.5.14+)"
    assert "installed release" in record["release"]["basis"]
    assert serverlog.installed_release(dict(server, same_root=False)) is None


def test_a_live_servers_binary_stdout_is_unreadable_not_clean(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(os.urandom(32 * 1024))
    record = serverlog.read_one({"pid": 4242}, fake_proc(tmp_path, stdout=log), None, no_commands)
    assert record["outcome"] == "unreadable" and "invalid UTF-8" in record["reason"]
    assert record["source"]["path"] == str(log) and record["crashes"] == []
