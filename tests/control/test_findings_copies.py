"""Copy rules (1, 3, 7) on minimal hand-written results."""
from gpudiag.findings import copies, hidden_states
from gpudiag.models import HostResult, ProbeResult
from probes.copybench import analysis


def host(name="h1", status="ok", **probes):
    return HostResult(name=name, status=status,
                      probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def timing(median):
    return {"status": "ok", "median_us": median, "p10_us": median * 0.9, "p90_us": median * 1.1, "cv": 0.05,
            "samples": 100, "method": "cuda_events"}


def workload(name="eagle_draft_bs8", path="eagle_draft", **strategies):
    return {"name": name, "path": path, "batch_size": 8, "hidden_size": 4096, "fields": ["a", "b", "c"],
            "strategies": {k: timing(v) for k, v in strategies.items()}, "best": min(strategies, key=strategies.get)}


def test_missing_foreach_copy_names_torch_version_and_measured_cost():
    bench = {"method": "CUDA events", "gpus": [{"index": 0, "workloads": [workload(loop=40.0, installed=40.0)]}]}
    flag = {"file": "sglang/srt/model_executor/cuda_graph_runner.py", "line": 12,
            "snippet": "_HAS = hasattr(torch, '_foreach_copy_')"}
    h = host(torch_caps={"torch_version": "2.0.1", "has_foreach_copy": False}, copy_bench=bench,
             sglang_source={"grouped_foreach_copy": {"has_foreach_copy_flag": [flag]}})
    [finding] = copies.torch_foreach_copy([h])
    assert finding.id == "copies.no_foreach_copy" and finding.severity == "warning"
    assert "2.0.1" in finding.title
    files = [e.file for e in finding.evidence if e.file]
    assert files == [flag["file"]] and finding.evidence[1].line == 12
    table = [e.table for e in finding.evidence if e.table][0]
    assert table[1][2] == "40.0 µs CPU issue / - GPU stream"    # per-tensor loop cost per replay, from copy_bench


def test_foreach_copy_present_and_working_is_silent():
    caps = {"torch_version": "2.8.0", "has_foreach_copy": True,
            "checks": {"cuda:0": {"pairs": {"int64->int64": "ok"}, "non_contiguous": "ok"}}}
    assert copies.torch_foreach_copy([host(torch_caps=caps)]) == []


def test_wrong_results_are_critical_and_raising_is_error():
    wrong = {"torch_version": "2.3.0", "has_foreach_copy": True,
             "checks": {"cuda:0": {"pairs": {"bfloat16->bfloat16": "wrong: max diff 3.0", "int64->int64": "ok"}}}}
    raises = {"torch_version": "2.3.0", "has_foreach_copy": True,
              "checks": {"cuda:0": {"pairs": {"int32->int32": "raises: RuntimeError"}}}}
    [w] = copies.torch_foreach_copy([host(torch_caps=wrong)])
    [r] = copies.torch_foreach_copy([host(torch_caps=raises)])
    assert (w.severity, r.severity) == ("critical", "error")
    assert w.evidence[0].table[1] == ("cuda:0", "bfloat16->bfloat16", "wrong: max diff 3.0")


def test_no_torch_caps_data_is_silent():
    assert copies.torch_foreach_copy([host(), HostResult(name="down", status="unreachable")]) == []


def test_hidden_states_inside_a_foreach_group_is_flagged_with_its_source_line():
    site = {"qualname": "Runner.replay", "file": "sglang/x.py", "line": 7, "snippet": "_grouped_foreach_copy_(d, s)",
            "fields": ["input_ids", "hidden_states"]}
    bench = {"gpus": [{"index": 0, "workloads": [], "recommended_split_bytes": 1 << 20}]}
    h = host(sglang_source={"grouped_foreach_copy": {"call_sites": [site]}}, copy_bench=bench)
    [finding] = hidden_states.hidden_states_split([h])
    assert finding.id == "copies.hidden_states_in_foreach"
    assert (finding.evidence[0].file, finding.evidence[0].line) == ("sglang/x.py", 7)
    assert "1 MiB" in finding.recommendation


def split_workload(name, hidden_bytes, whole, split):
    w = workload(name=name, grouped_foreach=whole, grouped_foreach_size_split=split)
    w["fields"] = [{"name": "seq_lens", "bytes": 128, "size_split": "foreach"},
                   {"name": "hidden_states", "bytes": hidden_bytes, "size_split": "dma"}]
    return w


def test_measured_split_slower_than_one_group_recommends_the_measured_split():
    small = split_workload("draft_bs32", 448 * 1024, whole=10.0, split=15.0)     # split loses
    large = split_workload("extend_bs32", 1792 * 1024, whole=16.0, split=12.0)   # split wins
    h = host(copy_bench={"device": "cuda", "gpus": [{"index": 0, "workloads": [small, large],
                                                     "crossover_bytes": 256 * 1024}]})
    [finding] = hidden_states.hidden_states_split([h])
    assert finding.id == "copies.split_wrong_for_gpu"
    assert finding.evidence[0].table[1:] == (("0", "draft_bs32", "448 KiB", "10.0 µs", "15.0 µs", "CPU issue"),)
    assert "at least 1.75 MiB" in finding.recommendation and "up to 448 KiB" in finding.recommendation
    assert "256 KiB" in finding.recommendation      # the sweep's crossover, named as what it is


def test_split_that_wins_nothing_split_off_or_cpu_timings_are_silent():
    wins = split_workload("w", 1 << 20, whole=15.0, split=10.0)
    unsplit = workload(grouped_foreach=10.0, grouped_foreach_size_split=15.0)   # no field moved: same copies
    loses = split_workload("l", 1 << 20, whole=10.0, split=15.0)
    assert hidden_states.hidden_states_split([host(copy_bench={"gpus": [{"index": 0, "workloads": [wins, unsplit]}]})]) == []
    cpu = {"device": "cpu", "gpus": [{"index": None, "device": "cpu", "workloads": [loses]}]}
    assert hidden_states.hidden_states_split([host(copy_bench=cpu)]) == []


def measured(bench):
    """copy_bench's data with the outliers the probe itself computes (the one verdict the rule words)."""
    bench["gpus"] = [dict(g, status="ok") for g in bench["gpus"]]
    bench["outliers"] = analysis.find_outliers(bench["gpus"])
    return bench


def gpus(*scales):
    return measured({"gpus": [{"index": i, "workloads": [workload(installed=20.0 * s, loop=40.0 * s)]}
                              for i, s in enumerate(scales)]})


def test_a_gpu_more_than_20_percent_off_its_siblings_is_named():
    [finding] = copies.gpu_copy_outliers([host(copy_bench=gpus(1.0, 1.02, 1.3, 0.99))])
    assert finding.title.startswith("GPU 2 ")
    row = finding.evidence[0].table[1]
    assert row[0] == "2" and row[1] == "2 of 2" and row[2] == "1.30" and row[-1] == "1.30"


def test_the_rule_words_the_probe_verdict_and_computes_none_of_its_own():
    bench = gpus(1.0, 1.02, 1.3, 0.99)
    bench["outliers"] = []   # the probe saw no outlier: the report must not find one either
    assert copies.gpu_copy_outliers([host(copy_bench=bench)]) == []


def many_metrics(index, scale=1.0, stray=None, noisy_scale=None):
    """A GPU with twelve workload medians; `stray` scales one of them, `noisy_scale` scales the noisy ones."""
    loads = []
    for n in range(12):
        value = 10.0 + n
        w = workload(name=f"w{n}", loop=value * scale)
        if stray is not None and n == 0:
            w["strategies"]["loop"]["median_us"] = value * stray
        if noisy_scale is not None and n < 8:
            w["strategies"]["loop"].update(median_us=value * noisy_scale, cv=0.3, noisy=True)
        loads.append(w)
    return {"index": index, "name": "NVIDIA H200", "workloads": loads}


def test_one_stray_median_or_noisy_timings_do_not_make_a_gpu_an_outlier():
    loads = [many_metrics(0), many_metrics(1, stray=1.6), many_metrics(2, noisy_scale=2.0),
             many_metrics(3, scale=1.01)]
    assert copies.gpu_copy_outliers([host(copy_bench=measured({"gpus": list(loads)}))]) == []
    bench = measured({"gpus": loads + [many_metrics(4, scale=1.35)]})
    [finding] = copies.gpu_copy_outliers([host(copy_bench=bench)])
    assert finding.title.startswith("GPU 4 ") and len(finding.evidence[0].table) == 2
    assert finding.evidence[0].table[1][:3] == ("4", "12 of 12", "1.35")


def test_gpus_within_20_percent_or_only_two_gpus_are_silent():
    assert copies.gpu_copy_outliers([host(copy_bench=gpus(1.0, 1.1, 0.95))]) == []
    assert copies.gpu_copy_outliers([host(copy_bench=gpus(1.0, 2.0))]) == []


def test_a_batched_replay_that_copies_no_hidden_states_is_not_flagged():
    from gpudiag.models import HostResult, ProbeResult
    eagle = {"batched": True, "hidden_states_separate": False, "grouped_fields": ["seq_lens", "positions"],
             "file": "sglang/srt/x.py", "line": 10}
    host = HostResult(name="h", status="ok", probes={"sglang_source": ProbeResult(
        "ok", data={"found": True, "eagle": {"draft": eagle}, "grouped_foreach_copy": {"call_sites": []}})})
    assert hidden_states._large_field_in_group(host) == []
    eagle["grouped_fields"] = ["seq_lens", "hidden_states"]
    assert [f.id for f in hidden_states._large_field_in_group(host)] == ["copies.hidden_states_in_foreach"]


def replayed(eager, graph):
    return dict(timing(eager), graph=dict(timing(graph), method="cuda_graph_replay"))


def hidden_workload(inside_gpu, own_gpu):
    """An EAGLE draft workload timed with hidden_states inside the foreach kernel and on its own copy_()."""
    w = workload(grouped_foreach=38.0)
    w["fields"] = [{"name": "seq_lens", "bytes": 64}, {"name": "hidden_states", "bytes": 65536}]
    w["strategies"] = {"grouped_foreach": replayed(38.0, inside_gpu),
                       "grouped_foreach_dma_split": replayed(41.0, own_gpu)}
    return w


def test_the_hidden_states_advice_follows_this_hosts_gpu_stream_time():
    site = {"qualname": "Runner.replay", "file": "sglang/x.py", "line": 7, "fields": ["seq_lens", "hidden_states"]}
    source = {"grouped_foreach_copy": {"call_sites": [site]}}
    slower_inside = {"device": "cuda", "gpus": [{"index": 0, "workloads": [hidden_workload(10.0, 4.0)]}]}
    [finding] = hidden_states.hidden_states_split([host(sglang_source=source, copy_bench=slower_inside)])
    assert finding.id == "copies.hidden_states_in_foreach" and finding.severity == "warning"
    assert "Measured here: keep hidden_states on its own copy_(), as sglang PR #28465 (0.5.14+) does: inside a " \
           "replayed graph the foreach kernel takes 2.5x the GPU time of hidden_states on its own copy_() (64 KiB of " \
           "hidden_states, 1 workload)" in finding.recommendation
    assert "eagerly its own copy_() adds 3.0 µs of CPU issue (one more launch)" in finding.recommendation
    # Measured the other way round on this host: the advice says so instead of repeating the PR.
    faster_inside = {"device": "cuda", "gpus": [{"index": 0, "workloads": [hidden_workload(3.0, 4.0)]}]}
    [finding] = hidden_states.hidden_states_split([host(sglang_source=source, copy_bench=faster_inside)])
    assert finding.severity == "info" and "measured as the faster way" in finding.title
    assert "hidden_states copies faster inside the foreach kernel, unlike sglang PR #28465" in finding.recommendation
    # Without source facts the measured verdict stands alone; with equal GPU time nothing is said.
    [alone] = hidden_states.hidden_states_split([host(copy_bench=slower_inside)])
    assert alone.id == "copies.hidden_states_measured"
    even = {"device": "cuda", "gpus": [{"index": 0, "workloads": [hidden_workload(4.0, 4.1)]}]}
    assert hidden_states.hidden_states_split([host(copy_bench=even)]) == []
