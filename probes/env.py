"""Host and GPU environment: OS, CPU, memory, the probing Python, torch build, GPUs and topology."""
import os
import platform
import socket
import sys


def collect(ctx):
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "python": {"executable": sys.executable, "version": platform.python_version(),
                   "prefix": sys.prefix, "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix)},
    }
