"""One line of facts per host (versions, GPUs, deployment) read from its probe data, and which interpreter
the sglang and torch facts were read in.

The fleet table, the fleet-drift rule and the JSON summary all read hosts through this, so they agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.findings.server_flags import graph_max_bs, graphs_disabled, server_args, servers_of
from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.derived import remembered
from gpudiag.models import HostResult

UNKNOWN = "-"

# Deployment flags whose difference between hosts matters for speculative decoding and graphs, in every
# spelling sglang has used (0.5.14 moved graph settings to per-phase flags and a JSON config).
DRIFT_FLAGS = (
    "model_path",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "disable_cuda_graph",
    "disable_decode_cuda_graph",
    "cuda_graph_backend_decode",
    "cuda_graph_config",
    "cuda_graph_max_bs",
    "cuda_graph_max_bs_decode",
    "tp_size",
    "dp_size",
    "attn_dp_size",
    "enable_dp_attention",
)


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
    cuda_graphs: str = UNKNOWN  # decode graphs: on | off | mixed | - (no server found)
    graph_max_bs: str = UNKNOWN  # largest decode batch size captured, as the servers set it
    deployment_flags: tuple[tuple[str, str], ...] = ()
    sglang_interpreter: str = UNKNOWN  # the Python whose sglang the source facts describe, with why
    torch_interpreter: str = UNKNOWN  # the Python whose torch env/torch_caps describe
    torch_elsewhere: bool = False  # torch facts come from another interpreter than sglang's

    @property
    def gpus(self) -> str:
        return f"{self.gpu_count}× {self.gpu_model}" if self.gpu_count else UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "hostname": self.hostname,
            "python": self.python,
            "gpu_count": self.gpu_count,
            "gpu_model": self.gpu_model,
            "compute_capability": self.compute_capability,
            "driver": self.driver,
            "cuda": self.cuda,
            "torch": self.torch,
            "sglang": self.sglang,
            "speculative_algorithm": self.speculative,
            "cuda_graphs": self.cuda_graphs,
            "graph_max_bs": self.graph_max_bs,
            "deployment_flags": dict(self.deployment_flags),
            "sglang_interpreter": self.sglang_interpreter,
            "torch_interpreter": self.torch_interpreter,
            "torch_elsewhere": self.torch_elsewhere,
        }


def _text(value: Any) -> str:
    return UNKNOWN if value in (None, "", [], {}) else str(value)


@remembered
def host_facts(host: HostResult) -> HostFacts:
    env = probe(host, "env") or {}
    gpus = as_dict(env.get("gpus"))
    devices = [d for d in as_list(gpus.get("devices")) if isinstance(d, dict)]
    models = sorted({str(d.get("name")) for d in devices if d.get("name")})
    capabilities = sorted({str(d.get("compute_capability")) for d in devices if d.get("compute_capability")})
    torch_version, torch_python = torch_facts(host)
    sglang = probe(host, "sglang_source") or {}
    servers = servers_of(host)
    sglang_python = sglang_interpreter(host, found_only=False)
    return HostFacts(
        name=host.name,
        status=host.status,
        reason=host.reason,
        hostname=_text(env.get("hostname")),
        python=_text(dig(env, "python", "version")),
        gpu_count=len(devices),
        gpu_model=" + ".join(models) or UNKNOWN,
        compute_capability=", ".join(capabilities) or UNKNOWN,
        driver=_text(gpus.get("driver_version")),
        cuda=_text(gpus.get("cuda_version") or dig(env, "torch", "cuda")),
        torch=_text(torch_version),
        sglang=_text(sglang.get("version")) if sglang.get("found", True) else "not installed",
        speculative=_speculative(servers),
        cuda_graphs=_cuda_graphs(servers),
        graph_max_bs=_max_bs_text(servers),
        deployment_flags=_flags(servers),
        sglang_interpreter=_interpreter_text(sglang_python),
        torch_interpreter=_interpreter_text(torch_python),
        torch_elsewhere=torch_from_other_interpreter(host),
    )


def _speculative(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return UNKNOWN
    algorithms = sorted({str(server_args(s).get("speculative_algorithm") or "none") for s in servers})
    return ", ".join(algorithms)


def sglang_interpreter(host: HostResult, found_only: bool = True) -> tuple[str, str] | None:
    """(path, why) of the Python whose installed sglang the source facts were read from (with found_only=False:
    also the one sglang was looked for in and not found)."""
    sglang = probe(host, "sglang_source") or {}
    interpreter = as_dict(sglang.get("interpreter"))
    if (found_only and sglang.get("found") is False) or not interpreter.get("path"):
        return None
    return str(interpreter["path"]), str(interpreter.get("why") or "-")


def torch_facts(host: HostResult) -> tuple[Any, tuple[str, str] | None]:
    """(torch version, (path, why) of the Python it was read in). torch_caps and env that ran under a chosen
    interpreter say so (`interpreter`) and then describe that Python's torch; without that record (older
    bundles), they describe the Python that ran the probes."""
    env, caps = probe(host, "env") or {}, probe(host, "torch_caps") or {}
    chosen = as_dict(caps.get("interpreter"))
    if chosen.get("path") and caps.get("torch_version"):
        return caps["torch_version"], (str(chosen["path"]), str(chosen.get("why") or "-"))
    # env reads torch's build in a child of the chosen interpreter too, and records which one.
    read_by_env = as_dict(dig(env, "torch", "interpreter"))
    if read_by_env.get("path") and dig(env, "torch", "version"):
        return dig(env, "torch", "version"), (str(read_by_env["path"]), str(read_by_env.get("why") or "-"))
    probing = dig(env, "python", "executable")
    version = dig(env, "torch", "version") or caps.get("torch_version")
    return version, ((str(probing), "ran the probes") if probing else None)


def torch_from_other_interpreter(host: HostResult) -> bool:
    """torch facts were read in another Python than the one whose sglang was read (both known and different)."""
    sglang, torch = sglang_interpreter(host), torch_facts(host)[1]
    return bool(sglang and torch and sglang[0] != torch[0])


def _interpreter_text(interpreter: tuple[str, str] | None) -> str:
    return f"{interpreter[0]} ({interpreter[1]})" if interpreter else UNKNOWN


def _max_bs_text(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return UNKNOWN
    values = {str(found[0]) if (found := graph_max_bs(server_args(s))) else "default" for s in servers}
    return ", ".join(sorted(values))


def _cuda_graphs(servers: list[dict[str, Any]]) -> str:
    if not servers:
        return UNKNOWN
    states = {"off" if graphs_disabled(server_args(s)) else "on" for s in servers}
    return states.pop() if len(states) == 1 else "mixed"


def _flags(servers: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    flags = []
    for key in DRIFT_FLAGS:
        values = sorted({_text(server_args(s).get(key)) for s in servers})
        if servers and values != [UNKNOWN]:  # a spelling no server here uses is not a difference
            flags.append((key, ", ".join(values)))
    return tuple(flags)
