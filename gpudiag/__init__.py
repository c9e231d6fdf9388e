"""gpudiag: remote diagnostics for multi-GPU LLM inference hosts.

Where this differs from DESIGN.md ("the control side never imports probes/ except to pack it"): it imports a few
probe-side modules that hold declarations and rules both sides must apply identically — the probes' own
declarations (probes/probe_info.py imports each probe module for its OPTIONS, SHAPE and NOTES; probes/schemas.py)
and the crash-log classifier (probes/crashlog/). Probe modules are standard library only at import and never
touch torch, sglang or a GPU there, and keeping one copy is what makes a host's verdict and the control side's
the same.
"""

__version__ = "0.1.0"
