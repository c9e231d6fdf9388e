"""Remote side of gpudiag: probes that run on a GPU host under the host's own Python (3.9+, stdlib only).

Nothing here imports the control side (`gpudiag`), torch at import time, or sglang ever.

One layout throughout: each probe is one module, `probes/<probe>.py`, with its `collect(ctx)`; the helpers
only it uses sit beside it in one package (copy_bench → copybench/, cuda_graph → graphrepro/, sglang_source →
sglang_facts/); what several probes share is a layer of its own (hostinfo/ for host readers, crashlog/ for
logs, gpu_layer, child, events, catalog). A new probe may be a package instead (`probes/<probe>/__init__.py`),
see docs/adding-a-probe.md.
"""
