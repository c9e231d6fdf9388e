"""What each probe puts in `probes.<name>.data` of a host result, declared with probes/schemas.py.

docs/probe-data.md is generated from these declarations (scripts/probe-data-doc.py); stored results are
checked against them when read back (gpudiag/probe_data.py).
"""
import importlib

from probes.catalog import DECLARED
from probes.schemas import anything, b, enum, i, lst, mapping, num, obj, s
from probes.servingstats.shape import ENDPOINTS, SERVING

_INTERPRETER = obj({"path": s("the Python that ran the work"),
                    "why": s("default | live_server | explicit | fallback"),
                    "ran": s("here | child").opt(), "reason": s().null().opt()},
                   "which interpreter ran torch and why")
_EVIDENCE = obj({"file": s("relative to site-packages"), "line": i().null(), "snippet": s().null().opt()})
_TIMING = obj({"status": s("ok | wrong | skipped | error").opt(), "median_us": num().null().opt(),
               "p10_us": num().opt(), "p90_us": num().opt(), "cv": num().opt(), "noisy": b().opt(),
               "samples": i().opt(), "method": s().opt(), "reason": s().opt()},
              "a timing: method, sample count, median and spread, or the reason there is none")

ENV = obj({
    "hostname": s(), "os": s(), "kernel": s(), "cpu_count": i().null(), "memory_total_mib": i().null(),
    "python": obj({"executable": s(), "version": s(), "prefix": s(), "venv": b()}),
    "torch": obj({"available": b().null("null when not asked (env.torch=false)"), "version": s().null(), "cuda": s().null(), "reason": s().null(),
                  "interpreter": _INTERPRETER.opt()},
                 "torch as the serving interpreter sees it, read without starting CUDA"),
    "gpus": obj({"status": enum(("ok", "skipped")), "reason": s().null(),
                 "count": i("GPUs nvidia-smi listed"), "driver_version": s().null(),
                 "devices": lst(obj({"index": i(), "name": s(), "uuid": s().null(),
                                     "memory_total_mib": num().null(), "memory_used_mib": num().null(),
                                     "compute_capability": s("sm_90 style").null(),
                                     "processes": lst(anything()).null("null when they could not be listed")}))}),
    "topology": obj({"status": s(), "summary": s("nvlink | pcie | mixed | single | unknown").opt(),
                     "matrix": mapping(anything(), "GPU → GPU → link as nvidia-smi topo -m prints it"),
                     "link_counts": mapping(anything()), "affinity": mapping(anything()),
                     "nics": lst(anything())}),
}, "host, Python, torch build, GPUs and their topology; skipped sections keep every key, empty")

TORCH_CAPS = obj({
    "torch_version": s(), "has_foreach_copy": b(), "method": s("foreach_copy | loop"),
    "pair_order": s("pair keys are written src->dst"),
    "interpreter": _INTERPRETER,
    "checks": mapping(obj({
        "status": s().opt(), "ok": b().null(), "reason": s().opt(),
        "pairs": mapping(s("ok | wrong: … | raises: …"), "src->dst dtype pair → outcome").opt(),
        "mixed_pairs_one_call": s().opt(), "non_contiguous": s().opt(), "mismatched_shapes": s().opt(),
        "non_blocking": s().opt(),
        "paths": mapping(obj({"path": s("fast | per_tensor | unknown"), "how": s().opt()})).opt()}),
        '"cpu" or "cuda:N" → functional checks of torch._foreach_copy_'),
}, "torch._foreach_copy_ present and correct, per device, in the serving interpreter")

DEPLOYMENT = obj({
    "servers": lst(obj({"pid": i(), "python": s().null(), "cmdline": lst(s()),
                        "args": mapping(anything(), "parsed server flags, typed"),
                        "cuda_visible_devices": s().null(), "env": mapping(anything(), "allow-listed keys only")})),
    "interpreter": obj({"path": s().null(), "why": s("explicit | live_server | default")}),
    "processes_scanned": i(),
    "server_logs": mapping(obj({"serving": SERVING.opt("absent when no log was read")}),
                           "server pid -> its log: where it was found, crashes, serving figures").opt(),
    "serving_endpoints": mapping(ENDPOINTS, "server pid -> its /server_info and /metrics numbers").opt(),
}, "live sglang servers: their flags, interpreter and environment (secrets redacted on the host)")

_EAGLE_RUNNER = obj({"batched": b().null("null when the runner class is absent"),
                     "per_tensor_fields": lst(s()).opt(), "grouped_fields": lst(s()).opt(),
                     "hidden_states_separate": b().null().opt()})
SGLANG_SOURCE = obj({
    "found": b(), "reason": s().null(), "interpreter": anything("{path, why} or the path"),
    "version": s().null().opt(), "version_mismatch": anything().opt(),
    "grouped_foreach_copy": obj({
        "definitions": lst(obj({"module": s(), "file": s(), "line": i().null(),
                                "fast_paths": lst(obj({"kind": s("small_copy_kernel | env_gated")})).opt()})),
        "call_sites": lst(obj({"qualname": s().null(), "file": s(), "line": i().null(),
                               "fields": lst(s()).opt(), "resolves_to": anything().opt()})),
        "has_foreach_copy_flag": lst(_EVIDENCE)}).opt(),
    "eagle": obj({"draft": _EAGLE_RUNNER, "draft_extend": _EAGLE_RUNNER}).opt(),
    "speculative_algorithms": lst(s()).opt(),
    "dflash": obj({"present": b(), "worker_file": s().null(), "draft_graph_guards": lst(anything()).opt()}).opt(),
    "server_flags": lst(obj({"name": s(), "file": s().null().opt(), "line": i().null().opt(),
                             "deprecated": b().opt()})).opt(),
    "integrity": obj({"method": s("record | editable | unknown"), "modified": lst(s()).opt(),
                      "missing": lst(s()).opt()}).opt(),
}, "facts read from the installed sglang's source, never imported; absent keys when sglang was not found")

_FIELD = obj({"name": s(), "dtype": s("the static buffer's"), "src_dtype": s("the batch tensor's"),
              "shape": lst(i()), "bytes": i(), "own_copy": b("copied with its own copy_() by the release"),
              "assumed": b("a name the field table does not know"),
              "split": enum(("dma", "foreach"), "grouped_foreach_dma_split: sglang's split, by name"),
              "size_split": enum(("dma", "foreach"), "grouped_foreach_size_split: by measured size")})
_WORKLOAD = obj({"name": s(), "path": s(), "batch_size": i(), "hidden_size": i().null(), "status": s(),
                 "reason": s().opt(), "fields": lst(_FIELD),
                 "strategies": mapping(_TIMING, "strategy → timing (and graph{…} replayed)").opt(),
                 "best": s().null().opt(), "saving_vs_installed_us": num().null().opt()})
COPY_BENCH = obj({
    "device": enum(("cuda", "cpu")), "method": s(), "torch_version": s(), "has_foreach_copy": b(),
    "installed": obj({"modules": lst(s()), "modules_from": s(), "release": s().null(),
                      "behaviour": mapping(obj({"kind": s("per_tensor | grouped | unknown"),
                                                "hidden_states_separate": b().null()}),
                                           "replay path → what the installed release does"),
                      "field_names": mapping(lst(s()), "replay path → field names read from the source"),
                      "dtype_pairs": mapping(anything())}),
    "gpus": lst(obj({"index": i().null("null for the CPU"), "name": s().null(), "status": s(),
                     "reason": s().opt(), "workloads": lst(_WORKLOAD).opt(),
                     "sweep": lst(obj({"bytes": i(), "copy_us": num().null(), "foreach_us": num().null()})).opt(),
                     "crossover_bytes": i().null().opt(), "recommended_split_bytes": i().null().opt(),
                     "workload_order": obj({"offset": i(), "first": s().null()},
                                           "where this GPU's rotated workload order began").opt(),
                     "lost_to_budget": lst(s(), "workloads skipped when the time budget ran out").opt(),
                     "lost_field_sets": lst(s(), "their replay paths").opt()})),
    "outliers": lst(obj({"index": i(), "median_ratio": num(), "metrics_compared": i(),
                         "metrics_off": i("figures more than the tolerance off").opt(), "metric": s(),
                         "value": num(), "siblings_median": num(), "ratio": num()}),
                    "GPUs copy_bench names as off their siblings: the one verdict"),
    "summary": obj({"paths": mapping(anything())}),
}, "replay input copies timed per strategy, per GPU, with the fields of probes/replay_fields.py")

CUDA_GRAPH = obj({
    "mode": s("sglang | synthetic | none").null(), "modes": lst(s()),
    "cells": lst(obj({"path": s(), "algorithm": s(), "batch_size": i(), "draft_tokens": i(),
                      "status": s(), "detail": s().null().opt(), "signature": anything().opt(),
                      "max_abs_diff": num().null().opt()})),
    "boundaries": lst(anything()), "boundary": anything(), "signatures": lst(anything()),
    "environment": obj({"torch": s().null(), "cuda_available": b().opt()}),
    "plan": anything("with cuda_graph.plan: every launch the repro would make (docs/repro-plan.md)").opt(),
    "notes": lst(anything()), "advice": lst(anything()),
}, "where CUDA graphs break: algorithm × batch size × draft tokens, with signatures")

SHAPES = {"env": ENV, "torch_caps": TORCH_CAPS, "deployment": DEPLOYMENT, "sglang_source": SGLANG_SOURCE,
          "copy_bench": COPY_BENCH, "cuda_graph": CUDA_GRAPH}
# A probe that declares itself (probes/catalog.py) declares its shape beside its code, as SHAPE.
SHAPES.update((name, importlib.import_module("probes." + name).SHAPE) for name in DECLARED
              if hasattr(importlib.import_module("probes." + name), "SHAPE"))
