"""gpudiag: remote diagnostics for multi-GPU LLM inference hosts."""

__version__ = "0.1.0"
