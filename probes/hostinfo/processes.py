"""The live sglang servers in a /proc view: each server's record (interpreter, flags, allow-listed env, what
names it), with the shell or init wrappers that launched it folded in. A shared probe-side layer: the deployment
probe records what it finds, and the interpreter choice asks it when deployment did not run.
"""
import os

from probes.hostinfo import sglang_cmdline as cmdline
from probes.hostinfo.system import read_bytes, read_text

MAX_ANCESTRY = 64


def proc_root_of(ctx):
    """deployment.proc_root, else $GPUDIAG_PROC_ROOT on the host (a container that sees the host's /proc
    mounted elsewhere), else /proc."""
    return (ctx.option("deployment", {}) or {}).get("proc_root") or os.environ.get("GPUDIAG_PROC_ROOT") or "/proc"


def this_hosts_process(proc_root, pid):
    """Whether `pid` read from this /proc view is a process of this host: the view is /proc itself, or the
    pid's entry links to /proc/PID (a view holding some of this host's processes), so its loopback is ours.
    A container's /proc, or the host's /proc mounted elsewhere, is not."""
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    return os.path.realpath(os.path.join(proc_root, str(pid))) == "/proc/%d" % pid


def _pids(proc_root):
    try:
        return sorted(int(name) for name in os.listdir(proc_root) if name.isdigit())
    except OSError:
        return []


def find_servers(proc_root="/proc"):
    """(servers, number of processes looked at): one record per server, wrappers and forks folded in."""
    pids = _pids(proc_root)
    matched, stats = _launches(proc_root, pids), {}
    dropped, wrappers = _fold_wrappers_and_forks(proc_root, matched, stats)
    servers = []
    for pid in sorted(set(matched) - dropped):
        record = server_record(proc_root, pid, matched[pid][0], matched[pid][1], stats)
        if record is None:
            continue
        if pid in wrappers:
            outer = matched[wrappers[pid]][0]
            record["launched_via"] = {"pid": wrappers[pid], "command": os.path.basename(outer[0]) if outer else None}
        servers.append(record)
    return servers, len(pids)


def _launches(proc_root, pids):
    """{pid: (argv, launch)} for every process whose command line starts an sglang server."""
    matched = {}
    for pid in pids:
        argv = cmdline.parse_cmdline(read_bytes(os.path.join(proc_root, str(pid), "cmdline")))
        launch = cmdline.find_launch(argv) if argv else None
        if launch:
            matched[pid] = (argv, launch)
    return matched


def _fold_wrappers_and_forks(proc_root, matched, stats):
    """(pids to drop, {server pid: wrapper pid}). A matched descendant with the same command line is a fork
    of its server; with another command line, it is the real server and the ancestor only launched it."""
    dropped, wrappers = set(), {}
    for pid, (argv, _) in matched.items():
        for ancestor in _ancestors(proc_root, pid, stats):
            if ancestor not in matched:
                continue
            if matched[ancestor][0] == argv:
                dropped.add(pid)
            else:
                dropped.add(ancestor)
                wrappers[pid] = ancestor
            break
    return dropped, wrappers


def _stat(proc_root, pid, cache):
    if pid not in cache:
        cache[pid] = cmdline.parse_stat(read_text(os.path.join(proc_root, str(pid), "stat")))
    return cache[pid]


def _ancestors(proc_root, pid, cache):
    """Every ancestor up to PID 1 included: in a container, PID 1 is often the entrypoint's shell or init
    wrapper (`sh -c "python -m sglang.launch_server ...; ..."`, tini, dumb-init) that launched the server."""
    seen = set()
    current = _stat(proc_root, pid, cache)["ppid"]
    while current and current >= 1 and current not in seen and len(seen) < MAX_ANCESTRY:
        seen.add(current)
        yield current
        current = _stat(proc_root, current, cache)["ppid"]


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def server_record(proc_root, pid, argv, launch, stats):
    """Everything about one server process; None when it vanished while being read."""
    base = os.path.join(proc_root, str(pid))
    if not os.path.isdir(base):
        return None
    env = cmdline.parse_environ(read_bytes(os.path.join(base, "environ")))
    args, positional = cmdline.parse_server_args(launch["args"])
    exe = _readlink(os.path.join(base, "exe"))
    python, source = resolve_python(launch["interpreter"], exe, env, _readlink(os.path.join(base, "cwd")))
    return {
        "pid": pid,
        "ppid": _stat(proc_root, pid, stats)["ppid"],
        "uid": _owner(base),
        "age_s": _age_s(proc_root, _stat(proc_root, pid, stats)["starttime_ticks"]),
        "entry": launch["entry"],
        "embedded_in_shell": launch["embedded"],
        "python": python,
        "python_source": source,
        "python_exists": bool(python) and os.path.exists(python),
        "same_root": _same_root(base),
        "exe": exe,
        "cmdline": cmdline.redact_argv(argv),
        "args": args,
        "positional_args": positional,
        "config_file": args.get("config"),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "env": env,
        "env_readable": bool(env) or os.access(os.path.join(base, "environ"), os.R_OK),
    }


def resolve_python(interpreter, exe, env, cwd):
    """(path, how it was found). The command line's path keeps the venv, which /proc/PID/exe resolves away."""
    if interpreter and os.path.isabs(interpreter):
        return interpreter, "cmdline"
    if interpreter and os.sep in interpreter and cwd:
        return os.path.normpath(os.path.join(cwd, interpreter)), "cmdline_cwd"
    if interpreter:
        # A bare name: find it the way the server's shell did, but trust a path only if it is the binary
        # the kernel actually ran (a pyenv shim or a stale PATH entry may point elsewhere).
        folders = [os.path.join(p, "bin") for p in (env.get("VIRTUAL_ENV"), env.get("CONDA_PREFIX")) if p]
        folders += [f for f in (env.get("PATH") or "").split(os.pathsep) if os.path.isabs(f)]
        for folder in folders:
            candidate = os.path.join(folder, interpreter)
            if os.access(candidate, os.X_OK) and (exe is None or not cmdline.python_like(exe)
                                                  or _same_file(candidate, exe)):
                return candidate, "server_path"
    if exe and cmdline.python_like(exe):  # a shell or init wrapper's own binary is never the server's Python
        return exe, "exe"
    return interpreter, "cmdline_name" if interpreter else "unknown"


def _same_file(a, b):
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _owner(base):
    try:
        return os.stat(base).st_uid
    except OSError:
        return None


def _same_root(base):
    """False when the process lives in another mount namespace root (a container): its paths are not ours."""
    try:
        theirs, ours = os.stat(os.path.join(base, "root")), os.stat("/")
    except OSError:
        return None
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def _age_s(proc_root, start_ticks):
    uptime = read_text(os.path.join(proc_root, "uptime"))
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        return round(float(uptime.split()[0]) - float(start_ticks) / ticks, 1)
    except (AttributeError, ValueError, TypeError, OSError, IndexError):
        return None
