"""Remote side of gpudiag: probes that run on a GPU host under the host's own Python (3.9+, stdlib only).

Nothing here imports the control side (`gpudiag`), torch at import time, or sglang ever.
"""
