"""The prose of docs/probe-data.md beside the declared tables: each probe's keys in full as it writes them,
and the rules its values follow. scripts/probe-data-doc.py puts them under each probe's table."""
import importlib

from probes.catalog import DECLARED

INTRO = (
    'What each probe puts in `probes.<name>.data` of a host result. Findings and the report read these '
    'keys; a probe may add keys, never rename these. Every source fact carries `file` (relative to '
    'site-packages), `line` and `snippet`; every timing carries `method`, `samples`, `median_us`, '
    '`p10_us`, `p90_us`, `cv`.'
)

NOTES = {
    'env': (
        '`hostname, os, kernel, cpu_count, memory_total_mib, python{executable,version,prefix,venv}`,\n`to'
        'rch{available, version, cuda, cudnn, nccl, reason}`,\n`gpus{status: ok|skipped, reason, source: n'
        'vidia-smi|torch, driver_version, cuda_version,\ndevices:[{index, name, uuid, pci_bus_id, memory_t'
        'otal_mib, memory_used_mib, utilization_pct,\ncompute_capability: "sm_90", processes:[{pid, name, '
        'used_memory_mib}]}]}`,\n`topology{status, gpus:[names], matrix:{GPU0:{GPU1:"NV18",...}}, summary:'
        ' nvlink|pcie|mixed|single|unknown}`.\n\nAlso: `os_id, os_version, platform, machine, cpu_usable, c'
        'pu_model, memory_available_mib`;\n`python{implementation, base_prefix, conda}`; `torch{file, hip,'
        ' git_version, arch_list}` (compiled GPU\narchitectures, read without starting CUDA); `gpus{nvidia'
        '_smi, count, processes_error}`; each device also has\n`compute_cap` (raw) and `driver_version`; `'
        "torch.interpreter` (as torch_caps') and `torch.executable`;\n`gpus.reason` says why compute capab"
        'ility is null (drivers before R510 reject the field); `devices[].processes` is `null` when the p'
        'rocesses could not be listed\n(unknown never looks idle); `topology{link_counts, affinity, nics, '
        'reason}`. Skipped sections keep every key, empty.'
    ),
    'torch_caps': (
        '`torch_version, has_foreach_copy, checks:{"cpu"|"cuda:N": {ok, pairs:{"int64->int64": ok|"wrong:'
        ' ..."|"raises: ..."},\nmixed_pairs_one_call: ok|raises, non_contiguous: ok|..., mismatched_shapes'
        ': ok|raises}}`.\nPair keys are written `src->dst` (`pair_order` says so). Also `method` (foreach_'
        'copy | loop); per device `status`,\n`method`, `non_blocking` (CPU: not applicable; CUDA: `ok` or '
        'what went wrong in which direction) and on CUDA\n`non_blocking_directions{host_to_device, device_'
        'to_host}` (pinned host memory ↔ the device); a CUDA device the GPU\npolicy leaves alone is `{stat'
        "us: skipped, ok: null, reason}` (busy: unless `--force`; a live server's: always).\n`interpreter{"
        'path, why: default|live_server|explicit, reason, pid?, note?, ran: child}` and `executable`: the'
        "\nchecks always run in a child of the host's chosen interpreter (a failing one makes the probe `s"
        'kipped`, naming\nit); per device `paths{contiguous_same_dtype, non_contiguous,\nmixed_pairs_one_ca'
        'll: {path: fast|per_tensor|unknown, how, kernels?, launches?, reason?, source?}}` (CUDA: from th'
        "e\nprofiler's kernel names; CPU: always per_tensor)."
    ),
    'deployment': (
        '`servers:[{pid, python, cmdline, args:{model_path, tp_size, dp_size, ep_size, speculative_algori'
        'thm,\nspeculative_draft_model_path, speculative_num_draft_tokens, speculative_num_steps, speculat'
        'ive_eagle_topk,\ndisable_cuda_graph, cuda_graph_max_bs, cuda_graph_bs, enable_dp_attention, mem_f'
        'raction_static, port, ...},\ncuda_visible_devices, env:{allow-listed keys only}, sglang{found, ve'
        'rsion, version_from, site_packages,\npackage_dir, reason}, identity{pid, port, gpus, tp_size, spe'
        'culative_algorithm}}]`,\n`interpreters:[{path, servers:[identity], sglang{...}}]` (one per distin'
        'ct server Python, read once and shared),\n`interpreter{path, why: explicit|live_server|default, r'
        "eason, requested, pid, candidates, servers_by_python,\ndiffers_from_live?, note?}` (the host's on"
        'e choice). Servers also carry\n`ppid, uid, age_s, entry, embedded_in_shell, python_source, python'
        '_exists, same_root, exe, positional_args,\nconfig_file, env_readable, launched_via{pid, command}`'
        '; the probe reports `processes_scanned`. `args` also types the\n0.5.14+ graph flags (decode/prefi'
        'll backends, max batch sizes, batch-size lists, `cuda_graph_config` as JSON).'
    ),
    'sglang_source': (
        '`found, reason, interpreter, site_packages, package_dir, version, version_source{file,line,snipp'
        'et}`,\n`grouped_foreach_copy{definitions:[{module, file, line, snippet, fast_paths:[{kind: small_'
        'copy_kernel|env_gated, detail, file, line, snippet}]}],\nhas_foreach_copy_flag:[{file,line,snippe'
        't}], call_sites:[{module, qualname, file, line, snippet, fields:[...],\ndynamic_fields:[...], res'
        'olves_to, reachable: bool, reached_from{file,line,snippet} | "module level", unreachable}]}`,\n`e'
        'agle{draft|draft_extend: {class, file, line, replay_method, batched: bool, per_tensor_copies, pe'
        'r_tensor_fields:[...],\nhidden_states_separate: bool, evidence:[{file,line,snippet}]}}`,\n`specula'
        'tive_algorithms:[...]`, `dflash{present, worker_file, draft_graph_guards:[{condition, message, f'
        'ile, line, snippet}]}`,\n`cuda_graph_runners:[{class, file, line}]`, `breakable_graph:[...]`,\n`se'
        'rver_flags:[{name, file, line, deprecated: bool, alias_of, choices:[...] | null}]`,\n`integrity{m'
        'ethod: record|editable|unknown, checked, modified:[file], missing:[file], editable{path, commit,'
        ' dirty}}`.\n\n`interpreter` is `{path, why}`. `eagle.*.batched` is `null` when the runner class is'
        ' absent (not `false`).\n`version` is `null` (with `version_reason`) when neither a version file o'
        'f the imported copy nor a dist-info that\nbelongs to it says; `dist_info_candidates:[{path, belon'
        'gs: record|top_level|direct_url|null, matched, checked}]`\nlists every sglang dist-info on the pa'
        'th, and `dist_info` is the one whose RECORD matches the files on disk.\n`fields` are buffer names'
        '; a tensor chosen by a loop at run time is in `dynamic_fields` with its loop.\n`speculative_algor'
        'ithm_evidence[].via` is `enum`, `register` or the helper that registers it, with `aliases`.\n`int'
        'egrity.editable.via` is `direct_url`, `finder` or `git` (a checkout on the path with no dist-inf'
        'o of its own).\nAlso: `dist_info, search_paths, metadata_version, version_sources, version_mismat'
        'ch,\nspeculative_algorithm_evidence, server_args{module, file, line, all_classes}, server_fields['
        '], files_scanned,\nparse_errors, finder_errors, timings_s, elapsed_s`; `definitions[].qualname`;\n'
        '`fast_paths[].env_var/function/module/condition`; `call_sites[].src_fields/unresolved`;\n`eagle.*'
        '.found/bases/replay_line/grouped_calls/grouped_fields/grouped_resolves_to/reason`;\n`dflash.in_al'
        'gorithms/workers`; `draft_graph_guards[].conditions/call_line/function/disables/log_conditions`;'
        '\n`server_flags[].dest/via/action/snippet`; `integrity.scope/unrecorded/record/reason`;\n`integrit'
        'y.editable.changed/toplevel`.'
    ),
    'copy_bench': (
        '`device: cuda|cpu, method, gpus:[{index, name, status (ok|skipped|error|timeout), reason, worklo'
        'ads:[{name, path,\nbatch_size, hidden_size, fields:[{name, dtype, src_dtype, shape, numel, bytes,'
        ' own_copy, assumed, split: dma|foreach,\nsize_split: dma|foreach}],\nstrategies:{loop|grouped_fore'
        'ach|grouped_foreach_dma_split|grouped_foreach_size_split|packed|installed: {status: ok|wrong|ski'
        'pped|error,\nmedian_us, p10_us, p90_us, cv, noisy, samples, method, speedup_vs_loop, reason,\ngrap'
        'h{median_us, p10_us, p90_us, cv, noisy, speedup_vs_loop, method: cuda_graph_replay}}}, best,\nsav'
        'ing_vs_installed_us, installed_baseline{kind, strategy, exact, median_us, reason}}],\nsweep:[{byt'
        'es, copy_us, foreach_us, copy{p10_us, p90_us, noisy}, foreach{...}}], crossover_bytes,\nrecommend'
        'ed_split_bytes, split_reason, h2d{bytes, pinned_us, pageable_us, sync_us, pinned{...}, pageable{'
        '...}},\nh2d_reason}], outliers:[{index, median_ratio, metrics_compared, metric, value, siblings_m'
        'edian, ratio}],\nsummary{paths{<path>{best, max_saving_vs_installed_us}}, recommended_split_bytes'
        '}`,\n`installed{module, variants, not_loaded, release, dtype_pairs, modules_from}`;\n`strategies.i'
        'nstalled.env.SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH{host_value, on, off}` where the release reads '
        'it.\nEvery strategy is verified against saved copies of the sources (a strategy that changes a so'
        'urce is `wrong`).\nAlso `python` (the interpreter that ran the benchmark), `interpreter{path, why'
        ', reason, ran: child|here}` (here only\nwith `copy_bench.isolate=false`), `server` (identity of t'
        "he live server whose flags and Python it used); a GPU's\n`idle_check{use, kind: idle|busy|server,"
        " reason, forced?}` is the GPU layer's verdict.\nOutliers need 3 GPUs or more and steady figures; "
        "the median of a GPU's ratios to its siblings decides (20%).\nA crossover needs copy_()'s p90 belo"
        "w the foreach kernel's p10; on the CPU there is no split (no copy engine).\nFields, dtypes and sh"
        "apes come from the one replay-field table (`probes/replay_fields.py`); `split` is sglang's own\ns"
        'plit (hidden_states on its own copy_() by name, `grouped_foreach_dma_split`), `size_split` the s'
        'ize variant\n(`grouped_foreach_size_split`, from `recommended_split_bytes`).'
    ),
    'cuda_graph': (
        '`mode: sglang|synthetic, modes:[...], settings{...}, environment{torch, cuda, has_foreach_copy, '
        'cuda_available,\ndriver, sglang, devices}, gpu{index, name, uuid, compute_capability, memory_tota'
        'l_mib}, skip_reason, memory_cap_mib, notes:[...]`,\n`cells:[{path: eagle_draft|eagle_draft_extend'
        '|dflash_verify|sglang, algorithm, batch_size, draft_tokens,\nstatus: ok|capture_failed|replay_fai'
        'led|mismatch|device_fault|timeout|skipped|crashed_on_request|hang|silent_failure|error,\ndetail, '
        'max_abs_diff, capture_s, memory_cap_mib, estimated_mib (synthetic only), acceptance_length, sign'
        'ature{name, kind, severity, meaning, recommendation, reference,\nlines:[{line, text}]}, log_excer'
        'pt, command, omitted_flags, config_sources,\nfamily, crash, advice_assumes (a failed cell\'s text read '
        'by the crash-log classifier, as `repro --log` reads it)}]`,\n`boundaries:[{label, mode, rows:[{b'
        'atch_size, max'
        '_ok, min_fail, fail_status, complete}], text, failing_from_batch_size,\nsafe_up_to}], boundary{..'
        ".}, signatures:[...], advice:[...]`.\nOptions: `max_mem_mib` (4096; the synthetic child's allocat"
        'or cap, cells estimated above it are `skipped`). Cells not\nrun for lack of time are `skipped` wi'
        'th a detail starting `time budget spent`; algorithms the installed sglang lacks\nare `skipped` wi'
        "th `sglang X has no ALGO`. In sglang mode every flag is spelled as the release's parser spells i"
        't\n(`omitted_flags` lists those it lacks); a launch whose value the parser would refuse is `skipp'
        "ed` with `the\nrelease's parser would refuse …`, and one whose interpreter cannot import sglang's"
        ' server module (or whose server\ndies on a missing module) is `skipped` with `sglang cannot start'
        " under PYTHON: module 'X' is not installed there …`.\n`interpreter{path, why, reason, pid?, note?"
        "}`: every child (device query, synthetic cells, sglang servers) runs\nunder the host's chosen int"
        'erpreter; `server` names the live server it describes (pid, port, gpus). GPUs follow the\none GPU'
        " policy: busy ones only with `--force`, a live server's never, no nvidia-smi process list = busy"
        '.\nA `repro cuda-graph-crash --log FILE` run stores no hosts: its matches are in run.json under `'
        'repro`\n(`log, outcome, matches[{line, ...}]`).'
    ),
}

# A probe that declares itself (probes/catalog.py) keeps its prose beside its code, as NOTES.
NOTES.update((name, importlib.import_module("probes." + name).NOTES) for name in DECLARED
             if isinstance(getattr(importlib.import_module("probes." + name), "NOTES", None), str))
