"""cuda_graph's options (`--set cuda_graph.KEY=VALUE`), declared once: the probe's defaults, the control
side's check of `--set` before connecting, and docs/probe-options.md all come from here.
`gpudiag repro cuda-graph-crash` sets the same options from its own flags.
"""
from probes import gpu_layer
from probes.optionspec import Option, defaults

ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")
MODES = ("auto", "sglang", "synthetic", "both")

OPTIONS = (
    Option("algorithms", "choice_list", list(ALGORITHMS), "Speculative algorithms whose graphs are captured.",
           choices=ALGORITHMS),
    Option("batch_sizes", "int_list", [1, 4, 16, 64], "Batch sizes captured.", minimum=1),
    Option("draft_tokens", "int_list", [2, 16], "Draft-token range [LOW,HIGH] bisected for the boundary.",
           minimum=1, length=2),
    Option("mode", "choice", "auto", "sglang (the installed release, dummy weights), synthetic (torch alone), "
           "both, or auto (sglang when it is importable).", choices=MODES),
    Option("layers", "int", 2, "Decoder layers kept in the reduced model.", minimum=1),
    Option("tp", "int", 1, "Tensor-parallel size of the sglang servers.", minimum=1),
    Option("topk", "int", 1, "EAGLE top-k.", minimum=1),
    Option("hidden_size", "int", 1024, "Hidden size of the synthetic forward (default: the model's, when known).",
           minimum=1),
    Option("model", "path", None, "Model directory whose config.json is reduced (default: the live server's).",
           nullable=True),
    Option("draft_model", "path", None, "Draft model directory (default: the live server's, or derived).",
           nullable=True),
    Option("cell_timeout", "float", 120.0, "Seconds one cell (one capture) may take.", minimum=1),
    Option("max_mem_mib", "int", 4096, "Most GPU memory one cell may use, in MiB.", minimum=64),
    Option("mem_fraction", "float", 0.5, "sglang's --mem-fraction-static for the servers it launches.",
           minimum=0),
    Option("judge_acceptance", "bool", False, "Count an acceptance length of 1.0 or less as a failure."),
    gpu_layer.BUSY_OPTION,
)

DEFAULTS = dict((k, v) for k, v in defaults(OPTIONS).items() if k not in ("mem_fraction", "judge_acceptance"))
