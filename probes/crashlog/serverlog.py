"""Finds and reads each live sglang server's log on this host, and classifies its last 8 MiB here, so
only the verdict and the matched lines (redacted) travel back.

Where a log is found, in order: the inventory's `server_log` (a path, `journal:UNIT` or `docker:NAME`),
a log-file flag on the server's command line, the server's stdout/stderr when they are regular files
(/proc/PID/fd/1 and 2: readable even when the file was deleted or lives in another mount namespace),
the journal of the systemd unit the process runs in, and `docker logs` (`podman logs`) of the container
it runs in (both from /proc/PID/cgroup).
"""
import glob
import os
import re
import stat

from probes.context import run_command
from probes.crashlog.classify import classify
from probes.log_window import last_lines
from probes.servingstats.figures import figures as serving_figures

TAIL_BYTES = 8 * 1024 * 1024
JOURNAL_LINES = 200000
COMMAND_TIMEOUT = 20.0
LOG_FLAGS = ("log_file", "log_path", "server_log", "log_output")
SPECIAL = re.compile(r"^(pipe|socket|anon_inode):")
UNIT = re.compile(r"/([^/\s]+\.service)(?:/|$)")
# A container's cgroup: /docker/ID, /system.slice/docker-ID.scope, /kubepods/.../cri-containerd-ID.scope, ...
CONTAINER = re.compile(r"(?:/docker/|docker-|libpod-)([0-9a-f]{12,64})(?:\.scope)?(?:/|$)", re.M)


def read_server_logs(servers, proc_root="/proc", configured=None, run=run_command):
    """{str(pid): record} for every server: where its log was found and what it shows, or why none was read."""
    return dict((str(s.get("pid")), read_one(s, proc_root, configured, run)) for s in servers)


def read_one(server, proc_root, configured, run):
    tried = []
    for source in _sources(server, proc_root, configured, run):
        text, meta, why = source()
        if text is None:
            tried.append(why)
            continue
        text = last_lines(text)[0]  # bounded by lines as well as bytes: a tail of empty lines costs nothing
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


def _sources(server, proc_root, configured, run):
    pid = server.get("pid")
    if configured:
        yield lambda: _configured(str(configured), run)
    for name in LOG_FLAGS:
        value = (server.get("args") or {}).get(name)
        if isinstance(value, str) and value:
            yield lambda value=value, name=name: _file(value, {"kind": "flag", "where": "--" + name.replace("_", "-"),
                                                              "path": value})
    yield lambda: _stdio(proc_root, pid)
    yield lambda: _journal_of(proc_root, pid, run)
    yield lambda: _container_of(proc_root, pid, run)


def _configured(spec, run):
    kind, _, rest = spec.partition(":")
    if kind in ("journal", "journalctl") and rest:
        return _journal(rest, run, "inventory")
    if kind in ("docker", "podman") and rest:
        return _container_logs(kind, rest, run)
    return _file(spec, {"kind": "inventory", "where": "server_log", "path": spec})


def _stdio(proc_root, pid):
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
        text, meta, why = _file(link, {"kind": name, "where": "/proc/%s/fd/%d" % (pid, fd), "path": target})
        if text is not None:
            return text, meta, why
        reasons.append(why)
    return None, None, ", ".join(reasons) or "no stdout or stderr"


def _file(path, meta):
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except OSError as exc:
        return None, None, "%s: %s" % (meta.get("path") or path, exc.strerror or exc)
    cut = size > TAIL_BYTES
    if cut and b"\n" in data:
        data = data[data.index(b"\n") + 1:]
    return data.decode("utf-8", "replace"), _meta(meta, len(data), cut), None


def _meta(source, read, cut):
    return {"source": source, "bytes_read": read, "truncated": cut}


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
    result = run(["journalctl", "-u", unit, "-n", str(JOURNAL_LINES), "--no-pager", "-o", "cat"],
                 timeout=COMMAND_TIMEOUT)
    if not result.get("ok"):
        return None, None, "journalctl -u %s: %s" % (unit, result.get("error") or result.get("stderr", "")[-200:])
    data = result.get("stdout") or ""
    return data[-TAIL_BYTES:], _meta({"kind": "journal", "where": "journalctl -u " + unit, "found_by": how},
                                     min(len(data), TAIL_BYTES), len(data) > TAIL_BYTES), None


def _container_logs(engine, name, run):
    if not re.match(r"^[\w][\w.-]*$", name):
        return None, None, "container %r: not a container name" % name
    result = run([engine, "logs", "--tail", str(JOURNAL_LINES), name], timeout=COMMAND_TIMEOUT)
    if not result.get("ok"):
        return None, None, "%s logs %s: %s" % (engine, name, result.get("error") or result.get("stderr", "")[-200:])
    # `docker logs` replays the container's stdout on stdout and its stderr on stderr.
    data = (result.get("stdout") or "") + (result.get("stderr") or "")
    return data[-TAIL_BYTES:], _meta({"kind": engine, "where": "%s logs %s" % (engine, name)},
                                     min(len(data), TAIL_BYTES), len(data) > TAIL_BYTES), None
