"""Running sglang servers on this host, read from /proc: their interpreter, flags and allow-listed env.

Per server: its interpreter and the sglang that interpreter imports (read once per interpreter, shared by the
servers that use it), and what names it (pid, port, GPUs). Also records the host's one interpreter choice
(probes/hostinfo/interpreter.py): --python, else the live server's, else the probing Python. A shell or init
wrapper that launched a server (up to PID 1, a container's entrypoint) is folded into that server, and its own
binary is never taken for the server's Python. Unreadable /proc entries (another user's process, a process
that just exited) are skipped. Options: deployment.proc_root
(default $GPUDIAG_PROC_ROOT, else /proc).
"""

from probes.crashlog.serverlog import read_server_logs
from probes.hostinfo import interpreter, serving
from probes.hostinfo.processes import find_servers, proc_root_of
from probes.servingstats.endpoints import read_endpoints

__all__ = ["collect", "choose_interpreter", "find_servers", "proc_root_of"]


def collect(ctx):
    proc_root = proc_root_of(ctx)
    servers, scanned = find_servers(proc_root)
    found = serving.interpreters(servers, timeout=min(20.0, ctx.time_left() / 4))
    for server in servers:  # each server's own sglang, read once per interpreter
        shared = [g for g in found if g["path"] == server.get("python")]
        server["sglang"] = dict(shared[0]["sglang"]) if shared else {"found": None, "reason": "interpreter unknown"}
        server["identity"] = serving.server_identity(server)
    return {"servers": servers, "processes_scanned": scanned, "interpreters": found,
            "interpreter": choose_interpreter(ctx.options, servers),
            "server_logs": read_server_logs(servers, proc_root, ctx.options.get("server_log")),
            "serving_endpoints": read_endpoints(servers, proc_root, budget_s=min(10.0, ctx.time_left() / 4))}


def choose_interpreter(options, servers):
    """The host's one interpreter choice (probes/hostinfo/interpreter.py), recorded with the servers."""
    return interpreter.choose(options, servers)
