"""One line of facts per host (versions, GPUs, deployment) read from its probe data.

The fleet table, the fleet-drift rule and the JSON summary all read hosts through this, so they agree.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from gpudiag.findings.common import as_dict, as_list, dig, probe, truthy_flag
from gpudiag.models import HostResult

UNKNOWN = "-"

# Deployment flags whose difference between hosts matters for speculative decoding and graphs.
DRIFT_FLAGS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "disable_cuda_graph", "cuda_graph_max_bs", "tp_size", "dp_size",
               "enable_dp_attention")


@dataclass(frozen=True)
class HostFacts:
    name: str
    status: str
    reason: str
    hostname: str = UNKNOWN
    python: str = UNKNOWN
    gpu_count: int = 0
    gpu_model: str = UNKNOWN
    compute_capability: str = UNKNOWN
    driver: str = UNKNOWN
    cuda: str = UNKNOWN
    torch: str = UNKNOWN
    sglang: str = UNKNOWN
    speculative: str = UNKNOWN
    cuda_graphs: str = UNKNOWN           # on | off | mixed | - (no server found)
    deployment_flags: tuple[tuple[str, str], ...] = ()

    @property
    def gpus(self) -> str:
        return f"{self.gpu_count}× {self.gpu_model}" if self.gpu_count else UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "reason": self.reason, "hostname": self.hostname,
                "python": self.python, "gpu_count": self.gpu_count, "gpu_model": self.gpu_model,
                "compute_capability": self.compute_capability, "driver": self.driver, "cuda": self.cuda,
                "torch": self.torch, "sglang": self.sglang, "speculative_algorithm": self.speculative,
                "cuda_graphs": self.cuda_graphs, "deployment_flags": dict(self.deployment_flags)}


def _text(value: Any) -> str:
    return UNKNOWN if value in (None, "", [], {}) else str(value)


def host_facts(host: HostResult) -> HostFacts:
    env = probe(host, "env") or {}
    gpus = as_dict(env.get("gpus"))
    devices = [d for d in as_list(gpus.get("devices")) if isinstance(d, dict)]
    models = sorted({str(d.get("name")) for d in devices if d.get("name")})
    capabilities = sorted({str(d.get("compute_capability")) for d in devices if d.get("compute_capability")})
    torch_version = dig(env, "torch", "version") or dig(probe(host, "torch_caps"), "torch_version")
    sglang = probe(host, "sglang_source") or {}
    servers = servers_of(host)
    return HostFacts(
        name=host.name, status=host.status, reason=host.reason,
        hostname=_text(env.get("hostname")), python=_text(dig(env, "python", "version")),
        gpu_count=len(devices), gpu_model=" + ".join(models) or UNKNOWN,
        compute_capability=", ".join(capabilities) or UNKNOWN,
        driver=_text(gpus.get("driver_version")), cuda=_text(gpus.get("cuda_version") or dig(env, "torch", "cuda")),
        torch=_text(torch_version),
        sglang=_text(sglang.get("version")) if sglang.get("found", True) else "not installed",
        speculative=_speculative(servers), cuda_graphs=_cuda_graphs(servers),
        deployment_flags=_flags(servers))


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


def _speculative(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return UNKNOWN
    algorithms = sorted({str(server_args(s).get("speculative_algorithm") or "none") for s in servers})
    return ", ".join(algorithms)


def graphs_disabled(args: dict[str, Any]) -> bool:
    """--disable-cuda-graph, or its newer spelling --cuda-graph-backend-decode=disabled."""
    return truthy_flag(args.get("disable_cuda_graph") or False) or \
        str(args.get("cuda_graph_backend_decode") or "").lower() == "disabled"


def _cuda_graphs(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return UNKNOWN
    states = {"off" if graphs_disabled(server_args(s)) else "on" for s in servers}
    return states.pop() if len(states) == 1 else "mixed"


def _flags(servers: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    flags = []
    for key in DRIFT_FLAGS:
        values = sorted({_text(server_args(s).get(key)) for s in servers})
        if servers:
            flags.append((key, ", ".join(values)))
    return tuple(flags)
