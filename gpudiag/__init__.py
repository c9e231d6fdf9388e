"""gpudiag: remote diagnostics for multi-GPU LLM inference hosts.

Where this differs from DESIGN.md ("the control side never imports probes/ except to pack it"): it imports a few
probe-side modules that hold declarations and rules both sides must apply identically — the probes' data shapes
and options (probes/data_shapes.py, probes/schemas.py, probes/probe_info.py) and the crash-log classifier
(probes/crashlog/). They are standard library only, never touch torch, sglang or a GPU, and keeping one copy is
what makes a host's verdict and the control side's the same.
"""

__version__ = "0.1.0"
