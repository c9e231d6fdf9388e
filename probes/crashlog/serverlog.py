"""Finds and reads each live sglang server's log on this host, and classifies its last 8 MiB here, so
only the verdict and the matched lines (redacted) travel back.

Where a log is found, in order: the inventory's `server_log` (a path, `journal:UNIT` or `docker:NAME`),
a log-file flag on the server's command line, the server's stdout/stderr when they are regular files
(/proc/PID/fd/1 and 2: readable even when the file was deleted or lives in another mount namespace),
the journal of the systemd unit the process runs in, and `docker logs` (`podman logs`) of the container
it runs in (both from /proc/PID/cgroup).

All reads of one scan share HOST_SECONDS (probes/log_read.py bounds each by bytes, lines and time: a FIFO,
a journalctl or docker that never returns cannot hold the scan); a read cut by time says so (`cut`,
`cut_note`).
"""
import glob
import os
import re
import stat
import time

from probes.crashlog.classify import classify
from probes.log_read import HOST_SECONDS, read_log, run_tail, time_note
from probes.log_window import last_lines
from probes.servingstats.figures import figures as serving_figures

TAIL_BYTES = 8 * 1024 * 1024
JOURNAL_LINES = 200000
LOG_FLAGS = ("log_file", "log_path", "server_log", "log_output")
SPECIAL = re.compile(r"^(pipe|socket|anon_inode):")
UNIT = re.compile(r"/([^/\s]+\.service)(?:/|$)")
# A container's cgroup: /docker/ID, /system.slice/docker-ID.scope, /kubepods/.../cri-containerd-ID.scope, ...
CONTAINER = re.compile(r"(?:/docker/|docker-|libpod-)([0-9a-f]{12,64})(?:\.scope)?(?:/|$)", re.M)


def run_log_command(argv, timeout):
    """`run` for the log commands: run_command's answer, from a read bounded by bytes and time whose output
    is kept when the time ran out (`cut`). `docker logs` replays the container's stderr on its own stderr."""
    found = run_tail(argv, timeout, TAIL_BYTES, merge_stderr=argv[1:2] == ["logs"])
    text = found.data.decode("utf-8", "replace")
    return {"ok": found.code == 0 or (found.cut == "time" and bool(text)), "stdout": text, "stderr": "",
            "error": found.error, "cut": found.cut, "seconds": timeout}


def read_server_logs(servers, proc_root="/proc", configured=None, run=run_log_command, seconds=HOST_SECONDS):
    """{str(pid): record} for every server: where its log was found and what it shows, or why none was read.
    All reads together stop after `seconds`."""
    deadline = time.monotonic() + seconds
    return dict((str(s.get("pid")), read_one(s, proc_root, configured, run, deadline)) for s in servers)


def read_one(server, proc_root, configured, run, deadline=None):
    deadline = time.monotonic() + HOST_SECONDS if deadline is None else deadline
    tried = []
    for source in _sources(server, proc_root, configured, run, deadline):
        if deadline - time.monotonic() <= 0:
            tried.append("not read: the time for reading server logs ran out")
            break
        text, meta, why = source()
        if text is None:
            tried.append(why)
            continue
        result = classify(text, None, installed_release(server))
        result.update(meta)
        result["serving"] = serving_figures(text, server.get("args"))  # the live flags: its log interval
        return result
    return {"source": None, "outcome": None,
            "reason": "no log found: " + "; ".join(tried) + "; name it with server_log: in the inventory"}


def installed_release(server):
    """The sglang release installed for the server's interpreter (its dist-info), for advice when the log
    itself does not say; None for a server in another container or without an installed release."""
    python = server.get("python")
    if not python or server.get("same_root") is False:
        return None
    prefixes = [os.path.dirname(os.path.dirname(python))]
    if prefixes[0] == "/usr":
        prefixes.append("/usr/local")
    for prefix in prefixes:
        for folder in ("site-packages", "dist-packages"):
            pattern = "lib/python3*/%s/sglang-*.dist-info" % folder
            for found in sorted(glob.glob(os.path.join(prefix, pattern))):
                version = re.match(r"sglang-(\d+\.\d+\.\d+)", os.path.basename(found))
                if version:
                    return version.group(1)
    return None


def _sources(server, proc_root, configured, run, deadline):
    pid = server.get("pid")
    timed = _Timed(run, deadline)
    if configured:
        yield lambda: _configured(str(configured), timed)
    for name in LOG_FLAGS:
        value = (server.get("args") or {}).get(name)
        if isinstance(value, str) and value:
            yield lambda value=value, name=name: _file(value, {"kind": "flag", "where": "--" + name.replace("_", "-"),
                                                              "path": value}, deadline)
    yield lambda: _stdio(proc_root, pid, deadline)
    yield lambda: _journal_of(proc_root, pid, timed)
    yield lambda: _container_of(proc_root, pid, timed)


class _Timed(object):
    """`run` given what is left of the scan's time for server logs."""

    def __init__(self, run, deadline):
        self.run, self.deadline = run, deadline

    def __call__(self, argv):
        return self.run(argv, timeout=round(max(0.1, self.deadline - time.monotonic()), 1))


def _configured(spec, run):
    kind, _, rest = spec.partition(":")
    if kind in ("journal", "journalctl") and rest:
        return _journal(rest, run, "inventory")
    if kind in ("docker", "podman") and rest:
        return _container_logs(kind, rest, run)
    return _file(spec, {"kind": "inventory", "where": "server_log", "path": spec}, run.deadline)


def _stdio(proc_root, pid, deadline):
    seen, reasons = set(), []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        link = os.path.join(proc_root, str(pid), "fd", str(fd))
        try:
            target = os.readlink(link)
        except OSError as exc:
            reasons.append("%s unreadable (%s)" % (name, exc.strerror or exc))
            continue
        special = SPECIAL.match(target)
        if special:
            reasons.append("%s is %s" % (name, special.group(1)))
            continue
        try:
            info = os.stat(link)
        except OSError as exc:
            reasons.append("%s (%s) unreadable (%s)" % (name, target, exc.strerror or exc))
            continue
        if not stat.S_ISREG(info.st_mode):
            reasons.append("%s is %s, not a file" % (name, target))
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        text, meta, why = _file(link, {"kind": name, "where": "/proc/%s/fd/%d" % (pid, fd), "path": target},
                                deadline)
        if text is not None:
            return text, meta, why
        reasons.append(why)
    return None, None, ", ".join(reasons) or "no stdout or stderr"


def _file(path, meta, deadline):
    try:
        found = read_log(path, max(0.1, deadline - time.monotonic()), TAIL_BYTES)
    except OSError as exc:
        return None, None, "%s: %s" % (meta.get("path") or path, exc.strerror or exc)
    if found.cut == "time" and not found.bytes_read:
        return None, None, "%s: %s, nothing read" % (meta.get("path") or path, time_note(found.seconds))
    return found.text, _meta(meta, found.bytes_read, found.truncated, found), None


def _meta(source, read, truncated, found=None):
    """The record's source fields; a read cut by time adds `cut` and the line that says so."""
    meta = {"source": source, "bytes_read": read, "truncated": truncated}
    if found is not None and found.cut == "time":
        meta.update(cut="time", cut_note=time_note(found.seconds))
    return meta


def _cgroup(proc_root, pid):
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup")) as fh:
            return fh.read()
    except OSError:
        return ""


def _journal_of(proc_root, pid, run):
    text = _cgroup(proc_root, pid)
    found = UNIT.search(text)
    if not found or CONTAINER.search(text):
        return None, None, "not in a systemd unit"
    return _journal(found.group(1), run, "cgroup")


def _container_of(proc_root, pid, run):
    """A server in a docker or podman container on this host: its engine's log of the container."""
    text = _cgroup(proc_root, pid)
    found = CONTAINER.search(text)
    if not found:
        return None, None, "not in a container seen from here"
    engine = "podman" if "libpod-" in text else "docker"
    return _container_logs(engine, found.group(1), run)


def _journal(unit, run, how):
    if not re.match(r"^[\w@.:-]+$", unit):
        return None, None, "unit %r: not a unit name" % unit
    result = run(["journalctl", "-u", unit, "-n", str(JOURNAL_LINES), "--no-pager", "-o", "cat"])
    if not result.get("ok"):
        return None, None, "journalctl -u %s: %s" % (unit, result.get("error") or result.get("stderr", "")[-200:])
    return _command_log(result.get("stdout") or "", result,
                        {"kind": "journal", "where": "journalctl -u " + unit, "found_by": how})


def _container_logs(engine, name, run):
    if not re.match(r"^[\w][\w.-]*$", name):
        return None, None, "container %r: not a container name" % name
    result = run([engine, "logs", "--tail", str(JOURNAL_LINES), name])
    if not result.get("ok"):
        return None, None, "%s logs %s: %s" % (engine, name, result.get("error") or result.get("stderr", "")[-200:])
    # `docker logs` replays the container's stdout on stdout and its stderr on stderr.
    data = (result.get("stdout") or "") + (result.get("stderr") or "")
    return _command_log(data, result, {"kind": engine, "where": "%s logs %s" % (engine, name)})


def _command_log(data, result, source):
    """(text, meta, None) of a log command's output: its last TAIL_BYTES, with the time cut it reports."""
    timed = result.get("cut") == "time"
    meta = _meta(source, min(len(data), TAIL_BYTES), len(data) > TAIL_BYTES or timed)
    if timed:
        meta.update(cut="time", cut_note=time_note(result.get("seconds") or 0))
    return last_lines(data[-TAIL_BYTES:])[0], meta, None  # by lines too, as read_log bounds a file
