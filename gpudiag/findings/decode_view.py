"""The decode step of each live server explained once, for Q11-Q14 and the roofline findings to read: its
model's bytes (config.json the deployment probe read), its TP/EP and flags, the GPU's datasheet and measured copy
bandwidth, the interconnect from nvidia-smi's topology, and each #running-req bucket of its decode lines (Q10's
figures) put through gpudiag.decode's step model. A speculative server is paired with a baseline server of the same
model on the same host for the fitted overhead and the measured speedup.

Every number in the analysis is `{v, src}`: `src` joins the sources of what it was computed from (measured: the
server's log, nvidia-smi, copy_bench; config: config.json and the command line; datasheet: gpudiag.decode.hardware;
assumed: the defaults named in docs/decode-model.md).

The parts, one job each: decode_inputs (what the host's probes say: GPU, link, copy bandwidth, config records),
decode_server (one server's setup and figures), decode_buckets (each measured bucket through the step model),
decode_economics (a speculative server's fit, speedup, break-even and what-ifs); this module runs them per host.
"""

from __future__ import annotations

import weakref

from gpudiag.findings.decode_economics import economics
from gpudiag.findings.decode_inputs import host_hardware
from gpudiag.findings.decode_server import ServerDecode, analyse
from gpudiag.findings.serving_view import serving_figures
from gpudiag.models import HostResult

# HostResult is not hashable: keyed by id, with a weak reference telling a reused id from its host. An analysis
# refers to its host, so an entry keeps its host alive: the cache keeps the latest hosts only, and a report that
# reads hosts a chunk at a time (gpudiag/cli/report_stream.py) lets the others go.
_CACHE: dict[int, tuple[weakref.ref[HostResult], list[ServerDecode]]] = {}
CACHED_HOSTS = 4


def host_decode(host: HostResult) -> list[ServerDecode]:
    """Every live server's analysis (computed once per host), speculative ones with their economics."""
    cached = _CACHE.get(id(host))
    if cached is not None and cached[0]() is host:
        return cached[1]
    hw = host_hardware(host)
    analysed = [analyse(item, hw) for item in serving_figures(host)]
    for spec in analysed:
        if spec.value is not None and spec.item.algorithm:
            spec.value["speculation"].update(economics(spec, analysed))
    for key in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        del _CACHE[key]
    while len(_CACHE) >= CACHED_HOSTS:
        del _CACHE[next(iter(_CACHE))]  # the oldest
    _CACHE[id(host)] = (weakref.ref(host), analysed)
    return analysed
