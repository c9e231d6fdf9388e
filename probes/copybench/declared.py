"""copy_bench's options (`--set copy_bench.KEY=VALUE`): name, kind, default and help, declared once.

The probe takes its defaults from here (probes/copybench/options.py), the control side checks `--set`
against it before connecting, and docs/probe-options.md is generated from it.
"""
from probes import gpu_layer
from probes.copybench import strategies, workloads
from probes.optionspec import Option

KIB, MIB = 1024, 1024 * 1024
DTYPES = ("bfloat16", "float16", "float32")

OPTIONS = (
    Option("device", "choice", "auto", "Where to measure: auto (CUDA when torch sees a GPU, else CPU), cpu or cuda.",
           choices=("auto", "cpu", "cuda")),
    Option("gpus", "int_list", None, "GPU indices to measure (default: every GPU torch sees).", minimum=0,
           nullable=True),
    Option("paths", "choice_list", list(workloads.PATHS), "Replay paths whose field sets are copied.",
           choices=workloads.PATHS),
    Option("strategies", "choice_list", list(strategies.STRATEGIES),
           "Copy strategies timed on each workload (installed: the release's own function).",
           choices=strategies.STRATEGIES),
    Option("batch_sizes", "int_list", [1, 8, 32, 128], "Batch sizes of the workloads (CPU default [1,8,32]).",
           minimum=1),
    Option("hidden_sizes", "int_list", [4096, 7168], "Hidden sizes of the workloads (CPU default [512]).",
           minimum=1),
    Option("topk", "int", 4, "EAGLE top-k of the workload shapes (default: the live server's flag, else 4).",
           minimum=1),
    Option("steps", "int", 3, "Speculative steps of the workload shapes (default: the live server's flag, else 3).",
           minimum=1),
    Option("draft_tokens", "int", 8, "Draft tokens of the workload shapes (default: the live server's flag, else 8).",
           minimum=1),
    Option("hidden_dtype", "choice", "bfloat16", "dtype of hidden_states in the workloads.", choices=DTYPES),
    Option("samples", "int", 10, "Timed samples per measurement (at least 3 are taken).", minimum=1),
    Option("target_us", "float", 500.0, "Time one sample aims for, in microseconds (CPU default 200).",
           minimum=0),
    Option("max_iters", "int", 200, "Most iterations in one sample (CPU default 100).", minimum=1),
    Option("sweep_min_bytes", "int", KIB, "Smallest tensor of the copy-vs-foreach size sweep, in bytes.",
           minimum=1),
    Option("sweep_max_bytes", "int", 256 * MIB, "Largest tensor of the size sweep, in bytes (CPU default 4 MiB).",
           minimum=1),
    Option("sweep_factor", "int", 2, "Growth factor between sweep sizes (CPU default 4).", minimum=2),
    Option("sweep_dtype", "choice", "bfloat16", "dtype of the size sweep.", choices=DTYPES),
    Option("split_bytes", "int", None, "Size above which the DMA split copies a field on its own "
           "(default: the measured crossover).", minimum=1, nullable=True),
    Option("graph", "bool", True, "Also time each strategy inside a CUDA graph."),
    Option("graph_copies", "int", 20, "Copies captured in one CUDA graph for the graph timing.", minimum=1),
    Option("h2d", "bool", True, "Also time host-to-device copies from pinned memory."),
    Option("max_mem_mib", "int", 2048, "Most GPU memory the benchmark allocates, in MiB.", minimum=1),
    gpu_layer.BUSY_OPTION,
    Option("isolate", "bool", None, "Run the benchmark in a child process (default: yes on CUDA, no on CPU).",
           nullable=True),
    Option("cpu_threads", "int", 1, "torch threads when measuring on the CPU.", minimum=1),
)

# Defaults that differ on the CPU: small, so the whole probe takes a few seconds there.
CPU_DEFAULTS = {"batch_sizes": [1, 8, 32], "hidden_sizes": [512], "target_us": 200.0, "max_iters": 100,
                "sweep_max_bytes": 4 * MIB, "sweep_factor": 4}
# The defaults that depend on the device, and those that do not (the shape options.py reads).
PER_DEVICE = ("batch_sizes", "hidden_sizes", "samples", "target_us", "max_iters", "sweep_min_bytes",
              "sweep_max_bytes", "sweep_factor")
_ALL = dict((o.name, o.default) for o in OPTIONS)
DEFAULTS = {"cuda": dict((k, _ALL[k]) for k in PER_DEVICE),
            "cpu": dict((k, CPU_DEFAULTS.get(k, _ALL[k])) for k in PER_DEVICE)}
COMMON = dict((k, v) for k, v in _ALL.items() if k not in PER_DEVICE)
