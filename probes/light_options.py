"""Options of the light probes (`--set PROBE.KEY=VALUE`), declared once: the control side checks `--set`
against them before connecting and docs/probe-options.md is generated from them.
"""
from probes import gpu_layer
from probes.optionspec import Option

DEPLOYMENT = (
    Option("proc_root", "path", "/proc", "The /proc view to read processes from (a container's, a copy, a test's)."),
)
ENV = (
    Option("command_timeout", "float", 10.0, "Seconds each external command (nvidia-smi, ...) may take.",
           minimum=1),
    Option("torch", "bool", True, "Describe the serving Python's torch (version, CUDA build)."),
)
TORCH_CAPS = (
    Option("cuda", "choice", "auto", "Functional check on GPUs: auto (idle GPUs only), true (every GPU), false.",
           choices=("auto", "true", "false")),
    gpu_layer.BUSY_OPTION,
    Option("child_timeout", "float", 120.0, "Seconds the checks may take under the serving Python.", minimum=1),
    Option("profile", "bool", True, "Profile which kernel each copy path runs on the GPU."),
)
SGLANG_SOURCE = (
    Option("site_packages", "path", None, "Read sglang from this site-packages instead of the serving Python's.",
           nullable=True),
    Option("flag_pattern", "regex", None, "Regular expression selecting the server flags reported "
           "(default: CUDA-graph and speculative flags).", nullable=True),
    Option("verify_all", "bool", False, "Hash every installed sglang file against RECORD (scan --verify-all)."),
)
