"""What a live server's command line says, by sglang's own spelling per release: its algorithm, whether decode
runs with CUDA graphs and the largest batch size they capture, and which flag the host's release takes for a
setting.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpudiag.findings.common import truthy_flag, version_tuple
from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.models import HostResult

# Algorithms served by the EAGLE workers and graph runners: sglang rewrites NEXTN to EAGLE, and
# StandaloneWorker subclasses EAGLEWorker.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")


def eagle_family(algorithm: Any) -> bool:
    return str(algorithm or "").upper() in EAGLE_FAMILY


def servers_of(host: HostResult) -> list[dict[str, Any]]:
    """The sglang servers the deployment probe found, ordered by pid."""
    servers = [s for s in as_list(dig(probe(host, "deployment"), "servers")) if isinstance(s, dict)]
    return sorted(servers, key=lambda s: (str(s.get("pid", "")), str(s.get("cmdline", ""))))


def command_line(server: dict[str, Any]) -> str:
    """The server's command line as one shell-quoted string (the probe records argv as a list)."""
    argv = server.get("cmdline")
    if isinstance(argv, list):
        return shlex.join(str(word) for word in argv)
    return str(argv or "")


def server_args(server: dict[str, Any]) -> dict[str, Any]:
    return as_dict(server.get("args"))


def algorithm_of(server: dict[str, Any]) -> str:
    """The server's --speculative-algorithm, upper case ('' when it serves without one)."""
    return str(server_args(server).get("speculative_algorithm") or "").upper()


def _graph_config(args: dict[str, Any]) -> dict[str, Any]:
    """--cuda-graph-config's JSON ({"decode": {"backend": ..., "max_bs": ...}, ...}); {} when absent or odd."""
    value = args.get("cuda_graph_config")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return as_dict(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() else None


def decode_graph_switch(args: dict[str, Any]) -> tuple[bool, str]:
    """(decode graphs disabled?, the flag that decided), by sglang's precedence from 0.5.14 on: the JSON
    --cuda-graph-config, then --cuda-graph-backend-decode, then --disable-decode-cuda-graph, then the legacy
    --disable-cuda-graph (the only switch before 0.5.14)."""
    backend = dig(_graph_config(args), "decode", "backend")
    if backend is not None:
        return str(
            backend
        ).lower() == "disabled", f"--cuda-graph-config '{json.dumps({'decode': {'backend': backend}})}'"
    if args.get("cuda_graph_backend_decode") not in (None, "", True):
        backend = str(args["cuda_graph_backend_decode"])
        return backend.lower() == "disabled", f"--cuda-graph-backend-decode {backend}"
    for key in ("disable_decode_cuda_graph", "disable_cuda_graph"):
        if truthy_flag(args.get(key) or False):
            return True, f"--{key.replace('_', '-')}"
    return False, ""


def graphs_disabled(args: dict[str, Any]) -> bool:
    """Whether the server runs decode (and so speculative draft/verify) without CUDA graphs."""
    return decode_graph_switch(args)[0]


def graph_max_bs(args: dict[str, Any]) -> tuple[int, str] | None:
    """(largest decode batch size captured, the flag that set it), when the command line sets one."""
    value = _int(dig(_graph_config(args), "decode", "max_bs"))
    if value is not None:
        return value, "--cuda-graph-config decode.max_bs"
    for key in ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"):
        value = _int(args.get(key))
        if value is not None:
            return value, f"--{key.replace('_', '-')}"
    for key in ("cuda_graph_bs_decode", "cuda_graph_bs"):
        raw = args.get(key)
        sizes = [_int(v) for v in (raw if isinstance(raw, list) else str(raw or "").replace(",", " ").split())]
        present = [size for size in sizes if size is not None]
        if sizes and len(present) == len(sizes):
            return max(present), f"--{key.replace('_', '-')}"
    return None


def release_flag(host: HostResult, *names: str) -> str:
    """The first of `names` the host's installed sglang offers as a current (not deprecated) flag; then the first
    it offers at all; then the first name, when the release's flags are unknown."""
    flags = {
        str(f.get("name")): f for f in as_list(dig(probe(host, "sglang_source"), "server_flags")) if isinstance(f, dict)
    }
    current = [n for n in names if n in flags and not flags[n].get("deprecated")]
    offered = [n for n in names if n in flags]
    return (current or offered or list(names))[0]


def max_bs_flag(host: HostResult) -> str:
    """The flag that sets the largest decode graph batch size in the host's release: --cuda-graph-max-bs-decode
    from 0.5.14 (where --cuda-graph-max-bs became its deprecated alias, later removed), else --cuda-graph-max-bs."""
    names = ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")
    offered = {
        str(f.get("name")) for f in as_list(dig(probe(host, "sglang_source"), "server_flags")) if isinstance(f, dict)
    }
    if offered & set(names):
        return release_flag(host, *names)
    installed = version_tuple(dig(probe(host, "sglang_source"), "version"))
    return names[0] if installed is not None and installed >= (0, 5, 14) else names[1]
