"""cuda_graph's options (`--set cuda_graph.KEY=VALUE`), declared once: the probe's defaults, the control
side's check of `--set` before connecting, and docs/probe-options.md all come from here.
`gpudiag repro cuda-graph-crash` sets the same options from its own flags.
"""
from probes import gpu_layer
from probes.optionspec import Option, defaults
from probes.schemas import anything, b, i, lst, num, obj, s

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

# What the probe writes (docs/probe-data.md; stored results are checked against it when read back).
SHAPE = obj({
    "mode": s("sglang | synthetic | none").null(), "modes": lst(s()),
    "cells": lst(obj({"path": s(), "algorithm": s(), "batch_size": i(), "draft_tokens": i(),
                      "status": s(), "detail": s().null().opt(), "signature": anything().opt(),
                      "max_abs_diff": num().null().opt(),
                      "need_s": num("seconds this cell would need; cells the time left could not hold").opt()})),
    "unmeasured": obj({"cells": i(), "need_s": num(), "detail": s()},
                      "the cells the probe's time did not hold and the seconds they would need").opt(),
    "boundaries": lst(anything()), "boundary": anything(), "signatures": lst(anything()),
    "environment": obj({"torch": s().null(), "cuda_available": b().opt()}),
    "plan": anything("with cuda_graph.plan: every launch the repro would make (docs/repro-plan.md)").opt(),
    "notes": lst(anything()), "advice": lst(anything()),
}, "where CUDA graphs break: algorithm × batch size × draft tokens, with signatures")
NOTES = """
`mode: sglang|synthetic, modes:[...], settings{...}, environment{torch, cuda, has_foreach_copy, cuda_available,
driver, sglang, devices}, gpu{index, name, uuid, compute_capability, memory_total_mib}, skip_reason,
memory_cap_mib, notes:[...]`, `cells:[{path: eagle_draft|eagle_draft_extend|dflash_verify|sglang, algorithm,
batch_size, draft_tokens, status:
ok|capture_failed|replay_failed|mismatch|device_fault|timeout|skipped|crashed_on_request|hang|silent_failure|error,
detail, max_abs_diff, capture_s, memory_cap_mib, estimated_mib (synthetic only), acceptance_length,
signature{name, kind, severity, meaning, recommendation, reference, lines:[{line, text}]}, log_excerpt, command,
omitted_flags, config_sources, family, crash, advice_assumes (a failed cell's text read by the crash-log
classifier, as `repro --log` reads it)}]`, `boundaries:[{label, mode, rows:[{batch_size, max_ok, min_fail,
fail_status, complete}], text, failing_from_batch_size, safe_up_to}], boundary{...}, signatures:[...],
advice:[...]`. Options: `max_mem_mib` (4096; the synthetic child's allocator cap, cells estimated above it are
`skipped`). Cells not run for lack of time are `skipped` with a detail starting `time budget spent` and `need_s`, the
seconds one would take (the probe's declared unit cost), summed in `unmeasured{cells, need_s, detail}`; the
synthetic sweep measures the top draft-token count of every path at every batch size (largest first) before any
row's bisection, so a short limit still answers every path it can; algorithms
the installed sglang lacks are `skipped` with `sglang X has no ALGO`. In sglang mode every flag is spelled as
the release's parser spells it (`omitted_flags` lists those it lacks); a launch whose value the parser would
refuse is `skipped` with `the release's parser would refuse …`, and one whose interpreter cannot import sglang's
server module (or whose server dies on a missing module) is `skipped` with `sglang cannot start under PYTHON:
module 'X' is not installed there …`. `interpreter{path, why, reason, pid?, note?}`: every child (device query,
synthetic cells, sglang servers) runs under the host's chosen interpreter; `server` names the live server it
describes (pid, port, gpus). GPUs follow the one GPU policy: busy ones only with `--force`, a live server's
never, no nvidia-smi process list = busy. A `repro cuda-graph-crash --log FILE` run stores no hosts: its matches
are in run.json under `repro` (`log, outcome, matches[{line, ...}]`).
"""
