"""copy_bench's options (`--set copy_bench.KEY=VALUE`): name, kind, default and help, declared once.

The probe takes its defaults from here (probes/copybench/options.py), the control side checks `--set`
against it before connecting, and docs/probe-options.md is generated from it.
"""
from probes import gpu_layer
from probes.copybench import strategies, workloads
from probes.optionspec import Option
from probes.schemas import anything, b, enum, i, lst, mapping, num, obj, s

KIB, MIB = 1024, 1024 * 1024
DTYPES = ("bfloat16", "float16", "float32")

OPTIONS = (
    Option("device", "choice", "auto", "Where to measure: auto (CUDA when torch sees a GPU, else CPU), cpu or cuda.",
           choices=("auto", "cpu", "cuda")),
    Option("gpus", "int_list", None, "GPU indices to measure (default: every GPU torch sees).", minimum=0,
           nullable=True),
    Option("paths", "choice_list", list(workloads.PATHS), "Replay paths whose field sets are copied.",
           choices=workloads.PATHS),
    Option("strategies", "choice_list", list(strategies.STRATEGIES),
           "Copy strategies timed on each workload (installed: the release's own function).",
           choices=strategies.STRATEGIES),
    Option("batch_sizes", "int_list", [1, 8, 32, 128], "Batch sizes of the workloads (CPU default [1,8,32]); unless given, "
           "the live server's decode max bs is added.",
           minimum=1),
    Option("hidden_sizes", "int_list", [4096, 7168], "Hidden sizes of the workloads (CPU default [512]).",
           minimum=1),
    Option("topk", "int", 4, "EAGLE top-k of the workload shapes (default: the live server's flag, else 4).",
           minimum=1),
    Option("steps", "int", 3, "Speculative steps of the workload shapes (default: the live server's flag, else 3).",
           minimum=1),
    Option("draft_tokens", "int", 8, "Draft tokens of the workload shapes (default: the live server's flag, else 8).",
           minimum=1),
    Option("hidden_dtype", "choice", "bfloat16", "dtype of hidden_states in the workloads.", choices=DTYPES),
    Option("samples", "int", 10, "Timed samples per measurement (at least 3 are taken).", minimum=1),
    Option("target_us", "float", 500.0, "Time one sample aims for, in microseconds (CPU default 200).",
           minimum=0),
    Option("max_iters", "int", 200, "Most iterations in one sample (CPU default 100).", minimum=1),
    Option("sweep_min_bytes", "int", KIB, "Smallest tensor of the copy-vs-foreach size sweep, in bytes.",
           minimum=1),
    Option("sweep_max_bytes", "int", 256 * MIB, "Largest tensor of the size sweep, in bytes (CPU default 4 MiB).",
           minimum=1),
    Option("sweep_factor", "int", 2, "Growth factor between sweep sizes (CPU default 4).", minimum=2),
    Option("sweep_dtype", "choice", "bfloat16", "dtype of the size sweep.", choices=DTYPES),
    Option("split_bytes", "int", None, "Size above which the DMA split copies a field on its own "
           "(default: the measured crossover).", minimum=1, nullable=True),
    Option("graph", "bool", True, "Also time each strategy inside a CUDA graph."),
    Option("graph_copies", "int", 20, "Copies captured in one CUDA graph for the graph timing.", minimum=1),
    Option("h2d", "bool", True, "Also time host-to-device copies from pinned memory."),
    Option("max_mem_mib", "int", 2048, "Most GPU memory the benchmark allocates, in MiB.", minimum=1),
    gpu_layer.BUSY_OPTION,
    Option("isolate", "bool", None, "Run the benchmark in a child process (default: yes on CUDA, no on CPU).",
           nullable=True),
    Option("cpu_threads", "int", 1, "torch threads when measuring on the CPU.", minimum=1),
)

# Defaults that differ on the CPU: small, so the whole probe takes a few seconds there.
CPU_DEFAULTS = {"batch_sizes": [1, 8, 32], "hidden_sizes": [512], "target_us": 200.0, "max_iters": 100,
                "sweep_max_bytes": 4 * MIB, "sweep_factor": 4}
# The defaults that depend on the device, and those that do not (the shape options.py reads).
PER_DEVICE = ("batch_sizes", "hidden_sizes", "samples", "target_us", "max_iters", "sweep_min_bytes",
              "sweep_max_bytes", "sweep_factor")
_ALL = dict((o.name, o.default) for o in OPTIONS)
DEFAULTS = {"cuda": dict((k, _ALL[k]) for k in PER_DEVICE),
            "cpu": dict((k, CPU_DEFAULTS.get(k, _ALL[k])) for k in PER_DEVICE)}
COMMON = dict((k, v) for k, v in _ALL.items() if k not in PER_DEVICE)

# What the probe writes (docs/probe-data.md; stored results are checked against it when read back).
_TIMING = obj({"status": s("ok | wrong | skipped | error").opt(), "median_us": num().null().opt(),
               "p10_us": num().opt(), "p90_us": num().opt(), "cv": num().opt(), "noisy": b().opt(),
               "samples": i().opt(), "method": s().opt(), "reason": s().opt()},
              "a timing: method, sample count, median and spread, or the reason there is none")
_FIELD = obj({"name": s(), "dtype": s("the static buffer's"), "src_dtype": s("the batch tensor's"),
              "shape": lst(i()), "bytes": i(), "own_copy": b("copied with its own copy_() by the release"),
              "assumed": b("a name the field table does not know"),
              "split": enum(("dma", "foreach"), "grouped_foreach_dma_split: sglang's split, by name"),
              "size_split": enum(("dma", "foreach"), "grouped_foreach_size_split: by measured size")})
_NEEDS = {"needs_s": num("the time it would have needed, s").opt(), "left_s": num("the time that was left").opt()}
_WORKLOAD = obj(dict({"name": s(), "path": s(), "batch_size": i(), "hidden_size": i().null(), "status": s(),
                      "reason": s().opt(), "fields": lst(_FIELD), "total_bytes": i().opt(),
                      "strategies": mapping(_TIMING, "strategy → timing (and graph{…} replayed)").opt(),
                      "best": s("fastest eagerly (CPU issue)").null().opt(),
                      "best_graph": s("fastest inside a replayed graph (GPU stream)").null().opt(),
                      "saving_vs_installed_us": num().null().opt()}, **_NEEDS))
_SWEEP_ROW = obj(dict({"bytes": i(), "copy_us": num().null(), "foreach_us": num().null(),
                       "copy_graph_us": num("inside a replayed graph").null().opt(),
                       "foreach_graph_us": num().null().opt(),
                       "status": s("skipped when not timed").opt(), "reason": s().opt()}, **_NEEDS))
SHAPE = obj({
    "device": enum(("cuda", "cpu")), "method": s(), "torch_version": s(),
    "has_foreach_copy": b().null("null when no torch process said"),
    "torch_info_from": enum(("torch_caps", "env", "child"), "where torch's version and GPU count came from").opt(),
    "installed": obj({"modules": lst(s()), "modules_from": s(), "release": s().null(),
                      "behaviour": mapping(obj({"kind": s("per_tensor | grouped | unknown"),
                                                "hidden_states_separate": b().null()}),
                                           "replay path → what the installed release does"),
                      "field_names": mapping(lst(s()), "replay path → field names read from the source"),
                      "dtype_pairs": mapping(anything())}),
    "gpus": lst(obj({"index": i().null("null for the CPU"), "name": s().null(),
                     "status": s("ok | skipped | timeout | error"),
                     "reason": s().opt(), "workloads": lst(_WORKLOAD).opt(),
                     "sweep": lst(_SWEEP_ROW).opt(),
                     "needs_s": num("a device with no measurement: the time its benchmark would take").opt(),
                     "time_needed_s": num("the time the units it could not measure would have needed").opt(),
                     "crossover_bytes": i().null().opt(), "recommended_split_bytes": i().null().opt(),
                     "crossover_clock": enum(("graph", "eager"), "the clock the crossover was read in").opt(),
                     "workload_order": obj({"offset": i(), "first": s().null()},
                                           "where this GPU's rotated workload order began").opt(),
                     "lost_to_budget": lst(s(), "workloads skipped when the time budget ran out").opt(),
                     "lost_field_sets": lst(s(), "their replay paths").opt(),
                     "cut_short": obj({"measured": i(), "planned": i(), "needs_s": num("the rest's time, s").null()},
                                      "a device stopped partway (timeout, hang, death): its `workloads` are "
                                      "those measured first").opt()})),
    "outliers": lst(obj({"index": i(), "median_ratio": num(), "metrics_compared": i(),
                         "metrics_off": i("figures more than the tolerance off").opt(), "metric": s(),
                         "value": num(), "siblings_median": num(), "ratio": num()}),
                    "GPUs copy_bench names as off their siblings: the one verdict"),
    "summary": obj({"paths": mapping(anything())}),
}, "replay input copies timed per strategy, per GPU, with the fields of probes/replay_fields.py")
NOTES = """
`device: cuda|cpu, method, gpus:[{index, name, status (ok|skipped|error|timeout), reason, needs_s, time_needed_s,
torch{version, has_foreach_copy}, workloads:[{name, path, batch_size, hidden_size, needs_s, left_s, fields:[{name, dtype, src_dtype, shape, numel, bytes, own_copy, assumed, split:
dma|foreach, size_split: dma|foreach}],
strategies:{loop|grouped_foreach|grouped_foreach_dma_split|grouped_foreach_size_split|packed|installed: {status:
ok|wrong|skipped|error, median_us, p10_us, p90_us, cv, noisy, samples, method, speedup_vs_loop, reason,
graph{median_us, p10_us, p90_us, cv, noisy, speedup_vs_loop, method: cuda_graph_replay}}}, best,
best_graph, saving_vs_installed_us, installed_baseline{kind, strategy, exact, median_us, reason}}], sweep:[{bytes,
copy_us, foreach_us, copy_graph_us, foreach_graph_us, copy{p10_us, p90_us, noisy, graph{...}}, foreach{...},
status, reason, needs_s}], crossover_bytes, crossover_clock: graph|eager, recommended_split_bytes, split_reason,
h2d{bytes, pinned_us, pageable_us, sync_us, pinned{...}, pageable{...}}, h2d_reason}], outliers:[{index,
median_ratio, metrics_compared, metric, value, siblings_median, ratio}], summary{paths{<path>{best,
best_graph, max_saving_vs_installed_us}}, recommended_split_bytes}`, `installed{module, variants, not_loaded, release,
dtype_pairs, modules_from}`; `strategies.installed.env.SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH{host_value, on,
off}` where the release reads it. Every strategy is verified against saved copies of the sources (a strategy
that changes a source is `wrong`). Also `python` (the interpreter that ran the benchmark), `interpreter{path,
why, reason, ran: child|here}` (here only with `copy_bench.isolate=false`), `server` (identity of the live
server whose flags and Python it used); a GPU's `idle_check{use, kind: idle|busy|server, reason, forced?}` is
the GPU layer's verdict. Each device, workload and sweep row has one constructor (`probes/copybench/records.py`)
on every path, so a timeout or an error still carries every declared key. Work is measured most informative first
(per path the workload the cost per decode step reads: the live server's batch size, else the largest; then the
sweep, at most half the time left; then the rest); a unit the time did not reach is `skipped` with `reason: time
budget spent`, `needs_s` (its declared cost, or the device's measured mean) and `left_s`; the first unit of a device
always runs while any time is left. In the child each workload is sent to the probe as soon as it is measured: a
device cut short (timeout, hang, death) keeps those `workloads` and says `cut_short{measured, planned, needs_s}`
(how many of how many, and the time the rest would need). The crossover is read in GPU-stream time (`crossover_clock: graph`) when the
sweep was timed inside replayed graphs. torch's version and GPU count come from env/torch_caps when they ran in the
same interpreter (`torch_info_from`), else from a short torch child. Outliers need 3 GPUs or more and steady figures; the median of a GPU's ratios to its
siblings decides (20%). A crossover needs copy_()'s p90 below the foreach kernel's p10; on the CPU there is no
split (no copy engine). Fields, dtypes and shapes come from the one replay-field table
(`probes/replay_fields.py`); `split` is sglang's own split (hidden_states on its own copy_() by name,
`grouped_foreach_dma_split`), `size_split` the size variant (`grouped_foreach_size_split`, from
`recommended_split_bytes`).
"""
