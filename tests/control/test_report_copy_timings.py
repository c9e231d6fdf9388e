"""The markdown report's copy-timing section and crash-log appendix, through render_markdown and the CLI:
spreads, noise marks, graph replay beside eager, the installed baseline, gates, casts, device status, sweep,
host→device, outliers and the methods the methodology names."""
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.findings import all_findings
from gpudiag.models import HostResult, ProbeResult
from gpudiag.run_records import RunManifest
from gpudiag.render.markdown import render_markdown
from gpudiag.run_records import LoadedRun
from gpudiag.run_loader import load_run

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
GATE = "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"


def timing(median, method="cuda_events", cv=0.01, noisy=False, graph=None, speedup=None):
    out = {"status": "ok", "median_us": median, "p10_us": round(median * 0.9, 3), "p90_us": round(median * 1.1, 3),
           "cv": cv, "noisy": noisy, "samples": 12, "method": method}
    if speedup is not None:
        out["speedup_vs_loop"] = speedup
    if graph is not None:
        out["graph"] = timing(graph, "cuda_graph_replay")
    return out


def copy_host(gpus, outliers=(), device="cuda"):
    data = {"device": device, "method": "cuda_events (eager) and cuda_graph_replay", "gpus": gpus,
            "outliers": list(outliers),
            "summary": {"paths": {"eagle_draft": {"best": {"grouped_foreach": 1, "grouped_foreach_dma_split": 3},
                                                  "max_saving_vs_installed_us": 4.0}}},
            "installed": {"modules": ["sglang.x.buffers"], "release": "0.5.20",
                                                     "modules_from": "sglang_source",
                                                     "dtype_pairs": {"seq_lens": ["int32", "int64"]}}}
    return HostResult(name="h1", status="ok", probes={"copy_bench": ProbeResult(status="ok", data=data)})


def render(*hosts):
    run = LoadedRun(path=Path("."), manifest=RunManifest(run_id="r", kind="scan", started_at="2026-01-01T00:00:00Z"),
                    hosts=tuple(hosts))
    return render_markdown(run, all_findings(run))


def gpu(index, **extra):
    installed = timing(11.0, graph=4.0, speedup=2.0)
    installed["variants"] = {"sglang.x.buffers": dict(installed), "sglang.x.registry": timing(13.0, graph=4.4)}
    installed["module"] = "sglang.x.buffers"
    installed["not_loaded"] = [{"module": "sglang.x.old", "reason": "ImportError: no module named sglang.x.old"}]
    installed["env"] = {GATE: {"host_value": "1", "on": timing(9.5, graph=3.1), "off": timing(11.5, graph=4.1)}}
    workload = {"name": "eagle_draft/bs128/h7168", "path": "eagle_draft", "batch_size": 128, "status": "ok", "total_bytes": 3670016, "best": "grouped_foreach_dma_split",
                "saving_vs_installed_us": 4.0,
                "installed_baseline": {"kind": "grouped", "strategy": "installed", "exact": True, "median_us": 11.0},
                "fields": [{"name": "seq_lens", "dtype": "int32", "src_dtype": "int64"},
                           {"name": "hidden_states", "dtype": "bfloat16", "src_dtype": "bfloat16"}],
                "strategies": {"loop": timing(22.0, graph=9.0, speedup=1.0),
                               "grouped_foreach": timing(10.0, cv=0.09, graph=4.2, speedup=2.2),
                               "grouped_foreach_dma_split": timing(7.0, graph=2.9, speedup=3.14),
                               "packed": {"status": "wrong", "reason": "changed a source"},
                               "installed": installed}}
    skipped = {"name": "dflash_verify/bs512", "status": "skipped", "reason": "needs about 900 MiB"}
    out = {"index": index, "name": "NVIDIA H200", "status": "ok", "workloads": [workload, skipped],
           "sweep": [{"bytes": 1 << 20, "copy_us": 3.0, "foreach_us": 6.0,
                      "copy": timing(3.0), "foreach": timing(6.0, noisy=True)}],
           "crossover_bytes": 1 << 20, "recommended_split_bytes": 1 << 20, "split_reason": "copy_() wins from 1 MiB",
           "h2d": {"bytes": 512, "method": "perf_counter, synchronize after each sample", "pinned_us": 8.0,
                   "pageable_us": 20.0, "sync_us": 3.0, "pinned": timing(8.0, "perf_counter"),
                   "pageable": timing(20.0, "perf_counter"), "sync": timing(3.0, "perf_counter")}}
    out.update(extra)
    return out


def test_one_table_with_a_column_per_device_eager_and_graph_spread_and_noise():
    slower = gpu(1)
    slower["workloads"][0]["strategies"]["loop"] = timing(30.0, graph=12.0, speedup=1.0)
    text = render(copy_host([gpu(0), slower]))
    assert text.count("| workload | strategy | GPU 0 | GPU 1 |") == 1                # one table, GPUs as columns
    assert "| eagle_draft/bs128/h7168 | installed | 11.0 µs (9.9–12.1) / 4.0 µs (3.6–4.4) | 11.0 µs (9.9–12.1) / " \
           "4.0 µs (3.6–4.4) |" in text
    assert "|   | loop | 22.0 µs (19.8–24.2) / 9.0 µs (8.1–9.9) | 30.0 µs (27.0–33.0) / 12.0 µs (10.8–13.2) |" in text
    assert "|   | grouped_foreach | 10.0 µs (9.0–11.0) ~ / 4.2 µs (3.8–4.6) |" in text   # cv 9% > 5%: noisy
    assert "|   | packed (sglang cannot use it) | wrong [2] | wrong [2] |" in text and "[2] changed a source" in text
    assert "| dflash_verify/bs512 | - | skipped: needs about 900 MiB | skipped: needs about 900 MiB |" in text


def test_devices_that_read_the_same_share_one_column():
    text = render(copy_host([gpu(0), gpu(1), gpu(2)]))
    assert text.count("| workload | strategy | GPU 0, 1, 2 |") == 1               # said once, not three times
    assert "|   | loop | 22.0 µs (19.8–24.2) / 9.0 µs (8.1–9.9) |\n" in text
    assert "| bytes: copy_() / foreach | GPU 0, 1, 2 |" in text
    assert "best on GPU 0, 1, 2 |" in text


def test_installed_variants_gates_baseline_and_casts_are_shown():
    text = render(copy_host([gpu(0)]))
    assert "| installed variant sglang.x.registry | 13.0 µs (11.7–14.3) / 4.4 µs (4.0–4.8) |" in text
    assert f"| installed, {GATE}=1 (host: 1) | 9.5 µs (8.6–10.4) / 3.1 µs (2.8–3.4) |" in text
    assert f"| installed, {GATE}=0 (host: 1) | 11.5 µs (10.3–12.7) / 4.1 µs (3.7–4.5) |" in text
    assert "| installed variant sglang.x.old | not loaded [1] |" in text
    assert "[1] ImportError: no module named sglang.x.old" in text
    assert "| eagle_draft/bs128/h7168 | 2 | 3.5 MiB | seq_lens int64 → int32 | fastest grouped_foreach_dma_split " \
           "(both clocks); of what sglang runs, grouped_foreach_dma_split (both clocks) saves 4.0 µs CPU issue / " \
           "1.1 µs GPU stream against installed (installed) |" in text
    assert "Installed sglang 0.5.20: `_grouped_foreach_copy_` timed from `sglang.x.buffers`" in text
    assert "seq_lens int64 → int32." in text
    # Which strategy won; savings are stated once, over what sglang can run (Q5), not here.
    assert "Across devices — eagle_draft: fastest by CPU issue grouped_foreach_dma_split ×1; by GPU stream " \
           "grouped_foreach_dma_split ×1." in text


def test_sweep_split_h2d_outliers_and_failed_devices():
    outlier = {"index": 2, "median_ratio": 1.41, "metrics_compared": 9, "metric": "h2d/pinned", "value": 11.0,
               "siblings_median": 8.0, "ratio": 1.375}
    gpus = [gpu(0), gpu(1, h2d=None, h2d_reason="pinned memory unavailable"), gpu(2),
            {"index": 3, "name": "NVIDIA H200", "status": "timeout", "reason": "no result within 60 s"},
            {"index": 4, "name": "NVIDIA H200", "status": "error", "reason": "CUDA error: an illegal memory access"}]
    text = render(copy_host(gpus, [outlier]))
    assert "- GPU 0, GPU 1, GPU 2: Split: crossover 1 MiB, recommended split 1 MiB — copy_() wins from 1 MiB." in text
    assert "| 1 MiB | 3.0 µs (2.7–3.3) / 6.0 µs (5.4–6.6) ~ (copy_()) |" in text
    assert "- GPU 0, GPU 2: Host→device (512 B, perf_counter, synchronize after each sample): pinned 8.0 µs " \
           "(7.2–8.8); pageable 20.0 µs (18.0–22.0); synchronize 3.0 µs (2.7–3.3)." in text
    assert "- GPU 1: Host→device: pinned memory unavailable." in text
    assert "- GPU 3 (NVIDIA H200): **timeout** — no result within 60 s" in text
    assert "- GPU 4 (NVIDIA H200): **error** — CUDA error: an illegal memory access" in text
    assert "| workload | strategy | GPU 0, 1, 2 |" in text           # failed devices: no column; equal ones share
    assert "| 2 | 1.41 | 9 | h2d/pinned | 11.0 | 8.0 | 1.375 |" in text


def test_methodology_names_the_methods_present_and_sample_counts():
    text = render(copy_host([gpu(0)]))
    method_line = next(line for line in text.splitlines() if line.startswith("- Copy timings:"))
    assert "`cuda_events`: CUDA events" in method_line and "`cuda_graph_replay`: graph replay" in method_line
    assert "`perf_counter`" in method_line and "12 samples per timing" in method_line
    cpu = copy_host([gpu(None, h2d=None, device="cpu")], device="cpu")
    for w in cpu.probes["copy_bench"].data["gpus"][0]["workloads"]:
        for s in w.get("strategies", {}).values():
            for key in ("graph", "variants", "env"):
                s.pop(key, None)
            s["method"] = "perf_counter"
    cpu.probes["copy_bench"].data["gpus"][0]["sweep"] = []
    text = render(cpu)
    assert "| workload | strategy | CPU |\n" in text                             # a CPU run is labelled CPU
    assert "Devices: CPU (NVIDIA H200)." in text          # the fixture keeps its GPU name; the column says CPU
    assert "`cuda_graph_replay`" not in text.split("## Methodology")[1]


def test_fleet3_cites_the_fixture_graph_and_dma_figures():
    text = render_markdown(load_run(FLEET3), all_findings(load_run(FLEET3)))
    data = json.loads((FLEET3 / "hosts" / "gpu-a.json").read_text())["probes"]["copy_bench"]["data"]
    [w] = [w for w in data["gpus"][0]["workloads"] if w["name"] == "eagle_draft/bs128/h7168"]
    split, foreach = w["strategies"]["grouped_foreach_size_split"], w["strategies"]["grouped_foreach"]
    assert split["graph"]["median_us"] < foreach["graph"]["median_us"] and w["best"] == "grouped_foreach_size_split"
    assert f"| grouped_foreach_size_split (no release ships it) | {split['median_us']:.1f} µs ({split['p10_us']:.1f}–{split['p90_us']:.1f})" \
           f" / {split['graph']['median_us']:.1f} µs" in text


def test_a_classified_log_shows_path_numbered_lines_and_advice(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("booting\nRuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED\nretry\n"
                   "RuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED\n")
    reports = tmp_path / "reports"
    classify = subprocess.run([sys.executable, "-m", "gpudiag", "repro", "cuda-graph-crash", "--log", str(log),
                               "--reports-dir", str(reports)], capture_output=True, text=True, timeout=120)
    assert classify.returncode == 1, classify.stderr
    run_id = classify.stdout.split("gpudiag report ")[1].split(")")[0]    # a log run is never reports/latest
    result = CliRunner().invoke(cli, ["report", run_id, "--reports-dir", str(reports), "--markdown"])
    assert result.exit_code == 1, result.output
    appendix = result.output.split("## Appendix: crash log")[1].split("## Methodology")[0]
    assert f"Log `{log}`: known signature: 1 crash in 4 lines" in appendix
    assert f"```text\n# {log}:2\n2: RuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED\n" \
           "4: RuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED\n```" in appendix
    assert "Run DFlash without prefill CUDA graphs" in appendix
    assert "No hosts: this run read a file on this machine and contacted none." in result.output
    assert "## Appendix: hosts" not in result.output


def test_every_strategy_table_reads_the_one_declaration():
    """Renamed or added in probes/copybench/strategies.py, a strategy follows in every table that names them."""
    from gpudiag.findings import savings
    from gpudiag.render import copy_timings, plots
    from probes.copybench import strategies
    assert set(strategies.SHOWN) == set(strategies.STRATEGIES)          # measured and shown: the same strategies
    assert copy_timings.STRATEGIES is strategies.SHOWN
    assert plots.DRAWN_STRATEGIES is strategies.DRAWN
    assert savings.USABLE_STRATEGIES is strategies.USABLE
    assert "packed" not in strategies.USABLE and "grouped_foreach_size_split" not in strategies.USABLE


def test_the_sweep_shows_both_clocks_and_the_split_names_its_clock():
    replayed = gpu(0, crossover_clock="graph",
                   sweep=[{"bytes": 1 << 20, "copy_us": 10.0, "foreach_us": 10.5, "copy_graph_us": 3.0,
                           "foreach_graph_us": 6.0, "copy": timing(10.0, graph=3.0), "foreach": timing(10.5, graph=6.0)},
                          {"bytes": 4 << 20, "copy_us": None, "foreach_us": None, "status": "skipped",
                           "reason": "time budget spent", "needs_s": 0.15}])
    text = render(copy_host([replayed]))
    assert "| bytes: copy_() / foreach, eager · in a replayed graph | GPU 0 |" in text
    assert "| 1 MiB | 10.0 µs (9.0–11.0) / 10.5 µs (9.4–11.6) (overlap) · 3.0 µs (2.7–3.3) / 6.0 µs (5.4–6.6) " \
           "(copy_()) |" in text
    assert "| 4 MiB | skipped: time budget spent |" in text
    assert "Split: crossover 1 MiB (GPU stream), recommended split 1 MiB" in text
