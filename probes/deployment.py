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
from probes.log_read import HOST_SECONDS
from probes.hostinfo import interpreter, serving
from probes.hostinfo.model_config import read_model_configs
from probes.hostinfo.processes import find_servers, proc_root_of
from probes.servingstats.endpoints import read_endpoints
from probes.optionspec import Option
from probes.schemas import anything, i, lst, mapping, obj, s
from probes.servingstats.shape import ENDPOINTS, SERVING

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "light",
    "order": 1,
    "needs": (),
    "summary": "live sglang servers: flags, interpreter, allow-listed environment",
    "gpu": "no",
    "torch": "no",
    "sglang": "no",
    "cost": "light: reads /proc, under a second",
}
OPTIONS = (
    Option("proc_root", "path", "/proc", "The /proc view to read processes from (a container's, a copy, a test's)."),
)
SHAPE = obj({
    "servers": lst(obj({"pid": i(), "python": s().null(), "cmdline": lst(s()),
                        "args": mapping(anything(), "parsed server flags, typed"),
                        "cuda_visible_devices": s().null(), "env": mapping(anything(), "allow-listed keys only")})),
    "interpreter": obj({"path": s().null(), "why": s("explicit | live_server | default")}),
    "processes_scanned": i(),
    "server_logs": mapping(obj({"serving": SERVING.opt("absent when no log was read")}),
                           "server pid -> its log: where it was found, crashes, serving figures").opt(),
    "serving_endpoints": mapping(ENDPOINTS, "server pid -> its /server_info and /metrics numbers").opt(),
    "model_configs": mapping(obj({"model": anything("config.json record").opt(),
                                  "draft": anything("the draft model's").opt()}),
                             "server pid -> its model's and draft's config.json (never weights)").opt(),
}, "live sglang servers: their flags, interpreter and environment (secrets redacted on the host)")
NOTES = """
`servers:[{pid, python, cmdline, args:{model_path, tp_size, dp_size, ep_size, speculative_algorithm,
speculative_draft_model_path, speculative_num_draft_tokens, speculative_num_steps, speculative_eagle_topk,
disable_cuda_graph, cuda_graph_max_bs, cuda_graph_bs, enable_dp_attention, mem_fraction_static, port, ...},
cuda_visible_devices, env:{allow-listed keys only}, sglang{found, version, version_from, site_packages,
package_dir, reason}, identity{pid, port, gpus, tp_size, speculative_algorithm}}]`, `interpreters:[{path,
servers:[identity], sglang{...}}]` (one per distinct server Python, read once and shared), `interpreter{path,
why: explicit|live_server|default, reason, requested, pid, candidates, servers_by_python, differs_from_live?,
note?}` (the host's one choice). Servers also carry `ppid, uid, age_s, entry, embedded_in_shell, python_source,
python_exists, same_root, exe, positional_args, config_file, env_readable, launched_via{pid, command}`; the
probe reports `processes_scanned`. `args` also types the 0.5.14+ graph flags (decode/prefill backends, max batch
sizes, batch-size lists, `cuda_graph_config` as JSON). `model_configs{pid: {model, draft: {where, how, config,
index_total_size, index_reason} | {reason}}}`: each server's --model-path and --speculative-draft-model-path
config.json (as the repro finds it: directory, else the Hugging Face cache) and model.safetensors.index.json's
`metadata.total_size`, never a weight file; bounded to 512 KiB per config and 64 MiB per index.
"""

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
            "server_logs": read_server_logs(servers, proc_root, ctx.options.get("server_log"),
                                            seconds=min(HOST_SECONDS, max(1.0, ctx.time_left() / 4))),
            "serving_endpoints": read_endpoints(servers, proc_root, budget_s=min(10.0, ctx.time_left() / 4)),
            "model_configs": read_model_configs(servers, proc_root)}


def choose_interpreter(options, servers):
    """The host's one interpreter choice (probes/hostinfo/interpreter.py), recorded with the servers."""
    return interpreter.choose(options, servers)
