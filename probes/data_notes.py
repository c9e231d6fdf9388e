"""The prose of docs/probe-data.md beside the declared tables: each probe's keys in full as it writes them,
and the rules its values follow. scripts/probe-data-doc.py puts them under each probe's table."""

INTRO = (
    'What each probe puts in `probes.<name>.data` of a host result. Findings and the report read these '
    'keys; a probe may add keys, never rename these. Every source fact carries `file` (relative to '
    'site-packages), `line` and `snippet`; every timing carries `method`, `samples`, `median_us`, '
    '`p10_us`, `p90_us`, `cv`.'
)

NOTES = {
    'env': (
        '`hostname, os, kernel, cpu_count, memory_total_mib, '
        'python{executable,version,prefix,venv}`,\n`torch{available, version, cuda, cudnn, nccl, '
        'reason}`,\n`gpus{status: ok|skipped, reason, source: nvidia-smi|torch, driver_version, '
        'cuda_version,\ndevices:[{index, name, uuid, pci_bus_id, memory_total_mib, memory_used_mib, '
        'utilization_pct,\ncompute_capability: "sm_90", processes:[{pid, name, '
        'used_memory_mib}]}]}`,\n`topology{status, gpus:[names], matrix:{GPU0:{GPU1:"NV18",...}}, summary: '
        'nvlink|pcie|mixed|single|unknown}`.\n\nAlso: `os_id, os_version, platform, machine, cpu_usable, '
        'cpu_model, memory_available_mib`;\n`python{implementation, base_prefix, conda}`; `torch{file, hip, '
        'git_version, arch_list}` (compiled GPU\narchitectures, read without starting CUDA); '
        '`gpus{nvidia_smi, count, processes_error}`; each device also has\n`compute_cap` (raw) and '
        "`driver_version`; `torch.interpreter` (as torch_caps') and `torch.executable`;\n`gpus.reason` says "
        'why compute capability is null (drivers before R510 reject the field); `devices[].processes` is '
        '`null` when the processes could not be listed\n(unknown never looks idle); `topology{link_counts, '
        'affinity, nics, reason}`. Skipped sections keep every key, empty.'
    ),
    'torch_caps': (
        '`torch_version, has_foreach_copy, checks:{"cpu"|"cuda:N": {ok, pairs:{"int64->int64": ok|"wrong: '
        '..."|"raises: ..."},\nmixed_pairs_one_call: ok|raises, non_contiguous: ok|..., mismatched_shapes: '
        'ok|raises}}`.\nPair keys are written `src->dst` (`pair_order` says so). Also `method` (foreach_copy '
        '| loop); per device `status`,\n`method`, `non_blocking`; a CUDA device that looked busy is `{status: '
        'skipped, ok: null, reason}` unless `--force`.\n`interpreter{path, why: '
        'default|live_server|explicit|fallback, ran: here|child, wanted?, reason?}` and `executable`\nwhen it '
        "ran in a child under the live server's Python; per device `paths{contiguous_same_dtype, "
        'non_contiguous,\nmixed_pairs_one_call: {path: fast|per_tensor|unknown, how, kernels?, launches?, '
        "reason?, source?}}` (CUDA: from the\nprofiler's kernel names; CPU: always per_tensor)."
    ),
    'deployment': (
        '`servers:[{pid, python, cmdline, args:{model_path, tp_size, dp_size, ep_size, '
        'speculative_algorithm,\nspeculative_draft_model_path, speculative_num_draft_tokens, '
        'speculative_num_steps, speculative_eagle_topk,\ndisable_cuda_graph, cuda_graph_max_bs, '
        'cuda_graph_bs, enable_dp_attention, mem_fraction_static, port, ...},\ncuda_visible_devices, '
        'env:{allow-listed keys only}}]`, `interpreter{path, why: explicit|live_server|default, requested, '
        'pid, candidates, note}`. Servers also carry\n`ppid, uid, age_s, entry, embedded_in_shell, '
        'python_source, python_exists, same_root, exe, positional_args,\nconfig_file, env_readable, '
        'launched_via{pid, command}`; the probe reports `processes_scanned`. `args` also types the\n0.5.14+ '
        'graph flags (decode/prefill backends, max batch sizes, batch-size lists, `cuda_graph_config` as '
        'JSON).'
    ),
    'sglang_source': (
        '`found, reason, interpreter, site_packages, package_dir, version, '
        'version_source{file,line,snippet}`,\n`grouped_foreach_copy{definitions:[{module, file, line, '
        'snippet, fast_paths:[{kind: small_copy_kernel|env_gated, detail, file, line, '
        'snippet}]}],\nhas_foreach_copy_flag:[{file,line,snippet}], call_sites:[{module, qualname, file, '
        'line, snippet, fields:[...],\ndynamic_fields:[...], resolves_to, reachable: bool, reached_from{file,line,snippet} | "module level", '
        'unreachable}]}`,\n`eagle{draft|draft_extend: {class, file, line, '
        'replay_method, batched: bool, per_tensor_copies, per_tensor_fields:[...],\nhidden_states_separate: '
        'bool, evidence:[{file,line,snippet}]}}`,\n`speculative_algorithms:[...]`, `dflash{present, '
        'worker_file, draft_graph_guards:[{condition, message, file, line, '
        'snippet}]}`,\n`cuda_graph_runners:[{class, file, line}]`, '
        '`breakable_graph:[...]`,\n`server_flags:[{name, file, line, deprecated: bool, '
        'alias_of, choices:[...] | null}]`,\n`integrity{method: record|editable|unknown, checked, modified:[file], missing:[file], '
        'editable{path, commit, dirty}}`.\n\n`interpreter` is `{path, why}`. `eagle.*.batched` is `null` when '
        'the runner class is absent (not `false`).\n'
        '`version` is `null` (with `version_reason`) when neither a version file of the imported copy nor a dist-info that\n'
        'belongs to it says; `dist_info_candidates:[{path, belongs: record|top_level|direct_url|null, matched, checked}]`\n'
        'lists every sglang dist-info on the path, and `dist_info` is the one whose RECORD matches the files on disk.\n'
        '`fields` are buffer names; a tensor chosen by a loop at run time is in `dynamic_fields` with its loop.\n'
        '`speculative_algorithm_evidence[].via` is `enum`, `register` or the helper that registers it, with `aliases`.\n'
        '`integrity.editable.via` is `direct_url`, `finder` or `git` (a checkout on the path with no dist-info of its own).\nAlso: `dist_info, search_paths, metadata_version, '
        'version_sources, version_mismatch,\nspeculative_algorithm_evidence, server_args{module, file, line, '
        'all_classes}, server_fields[], files_scanned,\nparse_errors, finder_errors, timings_s, elapsed_s`; '
        '`definitions[].qualname`;\n`fast_paths[].env_var/function/module/condition`; '
        '`call_sites[].src_fields/unresolved`;\n`eagle.*.found/bases/replay_line/grouped_calls/grouped_fields/grouped_resolves_to/reason`;\n`dflash.in_algorithms/workers`; '
        '`draft_graph_guards[].conditions/call_line/function/disables/log_conditions`;\n`server_flags[].dest/via/action/snippet`; '
        '`integrity.scope/unrecorded/record/reason`;\n`integrity.editable.changed/toplevel`.'
    ),
    'copy_bench': (
        '`device: cuda|cpu, method, gpus:[{index, name, status (ok|skipped|error|timeout), reason, '
        'workloads:[{name, path,\nbatch_size, hidden_size, fields:[{name, dtype, src_dtype, shape, numel, '
        'bytes, own_copy, assumed, split: dma|foreach,\nsize_split: '
        'dma|foreach}],\nstrategies:{loop|grouped_foreach|grouped_foreach_dma_split|grouped_foreach_size_split|packed|installed: '
        '{status: ok|wrong|skipped|error,\nmedian_us, p10_us, p90_us, cv, noisy, samples, method, '
        'speedup_vs_loop, reason,\ngraph{median_us, p10_us, p90_us, cv, noisy, speedup_vs_loop, method: '
        'cuda_graph_replay}}}, best,\nsaving_vs_installed_us, installed_baseline{kind, strategy, exact, '
        'median_us, reason}}],\nsweep:[{bytes, copy_us, foreach_us, copy{p10_us, p90_us, noisy}, '
        'foreach{...}}], crossover_bytes,\nrecommended_split_bytes, split_reason, h2d{bytes, pinned_us, '
        'pageable_us, sync_us, pinned{...}, pageable{...}},\nh2d_reason}], outliers:[{index, median_ratio, '
        'metrics_compared, metric, value, siblings_median, ratio}],\nsummary{paths{<path>{best, '
        'max_saving_vs_installed_us}}, recommended_split_bytes}`,\n`installed{module, variants, not_loaded, '
        'release, dtype_pairs, '
        'modules_from}`;\n`strategies.installed.env.SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH{host_value, on, '
        'off}` where the release reads it.\nEvery strategy is verified against saved copies of the sources (a '
        'strategy that changes a source is `wrong`).\nOutliers need 3 GPUs or more and steady figures; the '
        "median of a GPU's ratios to its siblings decides (20%).\nA crossover needs copy_()'s p90 below the "
        "foreach kernel's p10; on the CPU there is no split (no copy engine).\nFields, dtypes and shapes come "
        "from the one replay-field table (`probes/replay_fields.py`); `split` is sglang's own\nsplit "
        '(hidden_states on its own copy_() by name, `grouped_foreach_dma_split`), `size_split` the size '
        'variant\n(`grouped_foreach_size_split`, from `recommended_split_bytes`).'
    ),
    'cuda_graph': (
        '`mode: sglang|synthetic, modes:[...], settings{...}, environment{torch, cuda, has_foreach_copy, '
        'cuda_available,\ndriver, sglang, devices}, gpu{index, name, uuid, compute_capability, '
        'memory_total_mib}, skip_reason, memory_cap_mib, notes:[...]`,\n`cells:[{path: '
        'eagle_draft|eagle_draft_extend|dflash_verify|sglang, algorithm, batch_size, draft_tokens,\nstatus: '
        'ok|capture_failed|replay_failed|mismatch|device_fault|timeout|skipped|crashed_on_request|hang|silent_failure|error,\ndetail, '
        'max_abs_diff, capture_s, memory_cap_mib, estimated_mib (synthetic only), acceptance_length, '
        'signature{name, kind, severity, meaning, recommendation, reference,\nlines:[{line, text}]}, '
        'log_excerpt, command, omitted_flags, config_sources}]`,\n`boundaries:[{label, mode, '
        'rows:[{batch_size, max_ok, min_fail, fail_status, complete}], text, '
        'failing_from_batch_size,\nsafe_up_to}], boundary{...}, signatures:[...], advice:[...]`.\nOptions: '
        "`max_mem_mib` (4096; the synthetic child's allocator cap, cells estimated above it are `skipped`). "
        'Cells not\nrun for lack of time are `skipped` with a detail starting `time budget spent`; algorithms '
        'the installed sglang lacks\nare `skipped` with `sglang X has no ALGO`. In sglang mode every flag is spelled as the release\'s parser spells it\n'
        '(`omitted_flags` lists those it lacks); a launch whose value the parser would refuse is `skipped` with `the\n'
        'release\'s parser would refuse …`, and one whose interpreter cannot import sglang\'s server module (or whose server\n'
        'dies on a missing module) is `skipped` with `sglang cannot start under PYTHON: module \'X\' is not installed there …`.\nA `repro cuda-graph-crash '
        '--log FILE` run stores no hosts: its matches are in run.json under `repro`\n(`log, outcome, '
        'matches[{line, ...}]`).'
    ),
}
