"""Fleet drift (8), unscanned hosts (9) and the engine: ordering, determinism, tolerance of odd data."""
from pathlib import Path

from gpudiag.findings import all_findings, fleet, hosts
from gpudiag.models import Evidence, HostResult, ProbeResult
from gpudiag.run_records import LoadedRun, RunManifest
from gpudiag.run_loader import load_run

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"


def host(name, status="ok", sglang="0.5.12", torch="2.8.0", driver="570.1", flags=None):
    probes = {"env": ProbeResult(status="ok", data={"torch": {"version": torch}, "gpus": {
                  "driver_version": driver, "devices": [{"index": 0, "name": "NVIDIA H200"}]}}),
              "sglang_source": ProbeResult(status="ok", data={"found": True, "version": sglang})}
    if flags is not None:
        probes["deployment"] = ProbeResult(status="ok", data={"servers": [{"pid": 1, "args": flags}]})
    return HostResult(name=name, status=status, probes=probes)


def test_drift_names_every_differing_aspect_in_one_table():
    a = host("a", flags={"speculative_algorithm": "EAGLE3", "tp_size": 4})
    b = host("b", sglang="0.5.14", driver="575.2", flags={"speculative_algorithm": "EAGLE3", "tp_size": 8})
    [finding] = fleet.fleet_drift([a, b])
    rows = {row[0]: row[1:] for row in finding.evidence[0].table[1:]}
    assert rows == {"sglang": ("0.5.12", "0.5.14"), "NVIDIA driver": ("570.1", "575.2"), "--tp-size": ("4", "8")}
    assert finding.evidence[0].table[0] == ("aspect", "a", "b") and finding.hosts == ("a", "b")


def test_identical_hosts_unknown_values_and_a_single_host_are_silent():
    unknown = HostResult(name="c", status="ok", probes={"env": ProbeResult(status="ok", data={})})
    assert fleet.fleet_drift([host("a"), host("b"), unknown]) == []
    assert fleet.fleet_drift([host("a")]) == []


def test_unscanned_hosts_carry_status_and_reason():
    down = HostResult(name="down", status="unreachable", reason="connection refused")
    partial = HostResult(name="part", status="probe_error", reason="torch_caps error",
                         probes={"env": ProbeResult(status="ok", data={}),
                                 "torch_caps": ProbeResult(status="error", error={"type": "ImportError",
                                                                                  "message": "no torch"})})
    found = {f.hosts[0]: f for f in hosts.unscanned_hosts([down, partial, host("fine")])}
    assert set(found) == {"down", "part"}
    assert (found["down"].id, found["down"].severity) == ("hosts.unscanned", "error")
    assert "connection refused" in found["down"].evidence[0].text
    assert found["part"].severity == "warning"
    assert found["part"].evidence[1].table[1] == ("torch_caps", "error", "ImportError: no torch")


def run_of(*results):
    return LoadedRun(path=Path("."), manifest=RunManifest(run_id="r", kind="scan", started_at="2026-01-01T00:00:00Z"),
                     hosts=tuple(results))


def test_findings_are_sorted_by_severity_then_rule_and_deterministic():
    run = load_run(FLEET3)
    first, second = all_findings(run), all_findings(load_run(FLEET3))
    assert first == second
    ranks = ["critical", "error", "warning", "info"]
    keys = [(ranks.index(f.severity), f.id) for f in first]
    assert keys == sorted(keys)
    assert {f.id for f in first} >= {"cuda_graph.repro_failure", "hosts.unscanned", "fleet.drift",
                                      "sglang.eagle_per_tensor_copies", "copies.gpu_outlier"}


def test_odd_probe_data_never_raises():
    odd = HostResult(name="odd", status="ok", probes={
        name: ProbeResult(status="ok", data=data) for name, data in {
            "env": {"gpus": "nvidia-smi failed", "torch": []},
            "torch_caps": {"checks": ["x"], "has_foreach_copy": "maybe"},
            "deployment": {"servers": [None, {"args": "--tp 2"}]},
            "sglang_source": {"eagle": {"draft": None}, "integrity": [], "dflash": {"draft_graph_guards": [1]}},
            "copy_bench": {"gpus": [{"workloads": [{"strategies": {"loop": "fast"}}]}, 3]},
            "cuda_graph": {"cells": [{"status": "capture_failed", "batch_size": "big"}], "gpu": None},
        }.items()})
    findings = all_findings(run_of(odd, HostResult(name="empty", status="ok")))
    assert all(f.id != "report.rule_failed" for f in findings), [f.evidence for f in findings]


def test_a_rule_that_crashes_becomes_a_warning_not_a_traceback(monkeypatch):
    import gpudiag.findings as engine

    def broken(_hosts):
        raise KeyError("boom")
    monkeypatch.setattr(engine, "RULES", (broken,))
    [finding] = engine.all_findings(run_of(host("a")))
    assert finding.id == "report.rule_failed" and finding.evidence[0] == Evidence(kind="text", text="KeyError: 'boom'")


def test_drift_compares_graph_settings_across_flag_spellings_and_models():
    old = host("a", flags={"model_path": "m1", "disable_cuda_graph": True})
    new = host("b", sglang="0.5.23", flags={"model_path": "m2", "cuda_graph_backend_decode": "full",
                                            "cuda_graph_max_bs_decode": "48"})
    [finding] = fleet.fleet_drift([old, new])
    rows = {row[0]: row[1:] for row in finding.evidence[0].table[1:]}
    assert rows["CUDA graphs (decode)"] == ("off", "on")
    assert rows["decode graph max batch size"] == ("default", "48")
    assert rows["--model-path"] == ("m1", "m2")


def test_cuda_graphs_off_for_every_decode_switch():
    from gpudiag.findings.facts import host_facts
    for flags in ({"disable_decode_cuda_graph": True}, {"cuda_graph_backend_decode": "disabled"},
                  {"cuda_graph_config": '{"decode":{"backend":"disabled"}}'}):
        assert host_facts(host("a", flags=flags)).cuda_graphs == "off", flags
    assert host_facts(host("a", flags={"disable_prefill_cuda_graph": True})).cuda_graphs == "on"
