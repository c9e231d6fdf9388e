"""Host and GPU environment: OS, CPU, memory, the probing Python, torch build, GPUs and topology.

nvidia-smi answers the GPU questions without initialising CUDA. torch is imported only in a child of the
host's chosen interpreter (--python, else the live server's, else the probing one), never in the probes' own
process, and only its build facts are read; `torch.interpreter` says which Python it was and why. Without
nvidia-smi, the GPUs are read through torch.cuda in such a child too.
GPU health counters (`nvidia-smi -q`, this boot's Xid lines) and the serving interpreter's kernel-library
versions (package metadata, nothing imported) are read in every scan: probes/hostinfo/health.py, kernel_libs.py.
Options (`--set env.KEY=VALUE`): command_timeout (s, default 10), torch (false: do not import torch).
"""
import os
import platform
import socket
import sys

from probes.hostinfo import health, interpreter, kernel_libs, system, torch_child
from probes.hostinfo.gpus import collect_gpus
# The probe's pure parsers, re-exported so its tests feed recorded outputs to them through the probe.
from probes.hostinfo.nvidia_smi import (NvidiaSmiError, parse_compute_apps, parse_cuda_version,  # noqa: F401
                                        parse_query_gpu, parse_topology, sm_name)
from probes.hostinfo.system import parse_meminfo  # noqa: F401
from probes import gpu_layer
from probes.optionspec import Option, settings
from probes.schemas import anything, b, enum, i, lst, mapping, num, obj, s

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "light",
    "order": 2,
    "needs": ("deployment",),
    "summary": "GPUs, driver, compute capability, topology, the serving Python's torch",
    "gpu": "optional",
    "torch": "optional",
    "sglang": "no",
    "cost": "light: nvidia-smi and /proc, seconds",
}
OPTIONS = (
    # The GPU layer asks nvidia-smi with the same default limit.
    Option("command_timeout", "float", gpu_layer.DEFAULT_SMI_TIMEOUT,
           "Seconds each external command (nvidia-smi, ...) may take.", minimum=1),
    Option("torch", "bool", True, "Describe the serving Python's torch (version, CUDA build)."),
)
SHAPE = obj({
    "hostname": s(), "os": s(), "kernel": s(), "cpu_count": i().null(), "memory_total_mib": i().null(),
    "python": obj({"executable": s(), "version": s(), "prefix": s(), "venv": b()}),
    "torch": obj({"available": b().null("null when not asked (env.torch=false)"), "version": s().null(), "cuda": s().null(), "reason": s().null(),
                  "interpreter": interpreter.RECORD.opt()},
                 "torch as the serving interpreter sees it, read without starting CUDA"),
    "gpus": obj({"status": enum(("ok", "skipped")), "reason": s().null(),
                 "count": i("GPUs nvidia-smi listed"), "driver_version": s().null(),
                 "devices": lst(obj({"index": i(), "name": s(), "uuid": s().null(),
                                     "memory_total_mib": num().null(), "memory_used_mib": num().null(),
                                     "compute_capability": s("sm_90 style").null(),
                                     "processes": lst(anything()).null("null when they could not be listed")}))}),
    "topology": obj({"status": s(), "summary": s("nvlink | pcie | mixed | single | unknown").opt(),
                     "matrix": mapping(anything(), "GPU → GPU → link as nvidia-smi topo -m prints it"),
                     "link_counts": mapping(anything()), "affinity": mapping(anything()),
                     "nics": lst(anything())}),
    "health": health.SHAPE.opt("absent in results stored before it was read"),
    "kernel_libs": obj({"status": enum(("ok", "skipped")), "reason": s().null(), "interpreter": s(),
                        "packages": mapping(anything(), "normalised name → {version, dist_info}"),
                        "sglang": obj({"version": s().null(), "dist_info": s(),
                                       "requires": lst(s(), "its METADATA's Requires-Dist lines")}).null()},
                       "the serving interpreter's kernel libraries and sglang's requirements, from package metadata"
                       ).opt("absent in results stored before it was read"),
}, "host, Python, torch build, GPUs and their topology; skipped sections keep every key, empty")
NOTES = """
`hostname, os, kernel, cpu_count, memory_total_mib, python{executable,version,prefix,venv}`, `torch{available,
version, cuda, cudnn, nccl, reason}`, `gpus{status: ok|skipped, reason, source: nvidia-smi|torch,
driver_version, cuda_version, devices:[{index, name, uuid, pci_bus_id, memory_total_mib, memory_used_mib,
utilization_pct, compute_capability: "sm_90", processes:[{pid, name, used_memory_mib}]}]}`, `topology{status,
gpus:[names], matrix:{GPU0:{GPU1:"NV18",...}}, summary: nvlink|pcie|mixed|single|unknown}`.

Also: `os_id, os_version, platform, machine, cpu_usable, cpu_model, memory_available_mib`;
`python{implementation, base_prefix, conda}`; `torch{file, hip, git_version, arch_list}` (compiled GPU
architectures, read without starting CUDA); `gpus{nvidia_smi, count, processes_error}`; each device also has
`compute_cap` (raw) and `driver_version`; `torch.interpreter` (as torch_caps') and `torch.executable`;
`gpus.reason` says why compute capability is null (drivers before R510 reject the field); `devices[].processes`
is `null` when the processes could not be listed (unknown never looks idle); `topology{link_counts, affinity,
nics, reason}`. Skipped sections keep every key, empty.

`health` holds per GPU (by PCI bus id) what `nvidia-smi -q` prints about its health: ECC counters since the last
reset (`volatile`) and over its life (`aggregate`), retired pages, remapped rows, the clock event (throttle)
reasons, the PCIe link (current against the maximum GPU and host allow, which idle GPUs lower on purpose),
persistence and MIG mode, fabric state and NVLink links; `health.xid` holds the `NVRM: Xid` lines of this boot
(`dmesg`, else `journalctl -k`; unreadable without the right: `reasons` says so). `kernel_libs` lists the
versions of sgl-kernel, flashinfer, triton, deep_gemm, cuda-python, torch and every distribution the installed
sglang requires, read from the serving interpreter's dist-info METADATA, with sglang's `Requires-Dist` lines.
"""

# A hung command is cut this long before the probe's own limit, so env still answers with everything
# else it read (the GPU section then says "no answer within N s") instead of racing the runner's timeout.
ANSWER_MARGIN_S = 1.5


def collect(ctx):
    options = settings(OPTIONS, ctx.option("env"))
    cap = float(options["command_timeout"])
    timeout = max(0.5, min(cap, ctx.time_left() - ANSWER_MARGIN_S))
    data = host_facts()
    data["python"] = python_facts()
    want_torch = options["torch"] not in (False, "false", "0", 0)
    data["torch"] = serving_torch_facts(ctx, timeout) if want_torch else \
        {"available": None, "version": None, "cuda": None, "reason": "not asked (env.torch=false)"}
    chosen = interpreter.target(ctx)["path"] if want_torch else None
    data["gpus"], data["topology"] = collect_gpus(timeout, torch_fallback=want_torch, python=chosen,
                                                  modules=ctx.modules, run=ctx.results)
    budget = lambda: max(0.5, min(cap, ctx.time_left() - ANSWER_MARGIN_S))  # noqa: E731
    # A failing or absent nvidia-smi is asked nothing more; the Xid lines are read all the same (a GPU that
    # fell off the bus is what they record).
    smi = data["gpus"].get("nvidia_smi") if data["gpus"]["status"] == "ok" else None
    data["health"] = health.collect_health(smi, budget, data["gpus"]["reason"])
    data["kernel_libs"] = kernel_libs.collect_kernel_libs(chosen or interpreter.target(ctx)["path"], budget())
    return data


def host_facts():
    meminfo = system.parse_meminfo(system.read_text("/proc/meminfo"))
    release = system.parse_os_release(system.read_text("/etc/os-release"))
    try:
        usable_cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable_cpus = None
    return {
        "hostname": socket.gethostname(),
        "os": release.get("PRETTY_NAME") or platform.platform(),
        "os_id": release.get("ID"),
        "os_version": release.get("VERSION_ID"),
        "platform": platform.platform(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable_cpus,
        "cpu_model": system.parse_cpu_model(system.read_text("/proc/cpuinfo")),
        "memory_total_mib": meminfo.get("MemTotal"),
        "memory_available_mib": meminfo.get("MemAvailable"),
    }


def python_facts():
    base = getattr(sys, "base_prefix", sys.prefix)
    return {"executable": sys.executable, "version": platform.python_version(),
            "implementation": platform.python_implementation(), "prefix": sys.prefix, "base_prefix": base,
            "venv": sys.prefix != base, "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta"))}


def serving_torch_facts(ctx, timeout):
    """torch_facts() read in the run's torch child under the host's chosen interpreter (the probing one
    included; probes/hostinfo/torch_child.py), so this process never imports torch; when the child gives
    nothing, the reason names that interpreter."""
    wanted = interpreter.target(ctx)
    # Importing torch takes seconds on a cold disk: more than an nvidia-smi call.
    facts, why = torch_child.ask(wanted["path"], ctx.results, "build", ctx.modules, max(timeout, ctx.time_left(45.0)))
    recorded = {"path": wanted["path"], "why": wanted["why"], "ran": "child"}
    if facts is None:
        return {"available": False, "version": None, "cuda": None, "cudnn": None, "nccl": None, "arch_list": [],
                "reason": "torch facts not read: %s: %s" % (wanted["path"], why), "interpreter": recorded}
    facts["interpreter"] = recorded
    return facts


def torch_facts_job(args):
    """In the torch child under the serving Python: its torch build facts."""
    return torch_facts()


def torch_facts():
    """torch's build: versions of CUDA, cuDNN, NCCL and the compiled GPU archs; never initialises CUDA."""
    try:
        import torch
    except BaseException as exc:  # a broken install can raise anything, even SystemExit
        return {"available": False, "version": None, "cuda": None, "cudnn": None, "nccl": None,
                "reason": "torch is not importable: %s: %s" % (type(exc).__name__, exc)}
    facts = {"available": True, "reason": None, "version": getattr(torch, "__version__", None),
             "file": getattr(torch, "__file__", None),
             "cuda": getattr(torch.version, "cuda", None), "hip": getattr(torch.version, "hip", None),
             "git_version": getattr(torch.version, "git_version", None)}
    facts["cudnn"] = _quietly(lambda: torch.backends.cudnn.version())
    facts["nccl"] = _quietly(lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))
    # The compiled arch list straight from the build flags: torch.cuda.get_arch_list() would query devices.
    flags = _quietly(lambda: torch._C._cuda_getArchFlags())
    facts["arch_list"] = flags.split() if isinstance(flags, str) else []
    return facts


def _quietly(read):
    try:
        return read()
    except Exception:
        return None
