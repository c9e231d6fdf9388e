"""The probe's plan-only answer: every launch, built by the run's own code, with no torch child started and
data that fits the cuda_graph declaration (the control side validates it like any result)."""
import pytest

from gpudiag.probe_data import probe_problem
from probes import cuda_graph
from probes.context import ProbeContext


@pytest.fixture(autouse=True)
def no_live_servers(tmp_path, monkeypatch):
    """An empty /proc: the plan must not pick up other processes' servers on this machine."""
    (tmp_path / "proc").mkdir()
    monkeypatch.setenv("GPUDIAG_PROC_ROOT", str(tmp_path / "proc"))


def test_the_plan_starts_no_child_and_fits_the_declared_shape(monkeypatch):
    def no_worker(*args, **kwargs):
        raise AssertionError("a torch child was started for a plan")
    monkeypatch.setattr(cuda_graph, "Worker", no_worker)
    source = {"version": "0.5.23", "speculative_algorithms": ["EAGLE", "EAGLE3", "DFLASH"]}
    options = {"cuda_graph": {"plan": True, "mode": "sglang", "draft_tokens": [4, 8], "batch_sizes": [1, 2]}}
    data = cuda_graph.collect(ProbeContext(options=options, results={"sglang_source": source}, deadline=None))
    assert probe_problem("cuda_graph", {"status": "ok", "data": data}) is None
    launches = data["plan"]["launches"]
    assert [(l["algorithm"], l["draft_tokens"]) for l in launches] == [
        ("EAGLE", 8), ("EAGLE", 4), ("EAGLE3", 8), ("EAGLE3", 4), ("DFLASH", 8), ("DFLASH", 4)]
    assert all(l["cells"] == [[1, l["draft_tokens"]], [2, l["draft_tokens"]]] for l in launches)
    assert data["plan"]["budget"]["launches_at_most"] == 3 * 4   # two ends, two halvings over 4..8, each
    assert data["cells"] == [] and any("sglang's server flags unknown" in n for n in data["notes"])


@pytest.mark.parametrize("missing", ["EAGLE3"])
def test_an_algorithm_the_release_lacks_is_not_planned(missing):
    source = {"version": "0.5.5", "speculative_algorithms": ["EAGLE"]}
    options = {"cuda_graph": {"plan": True, "mode": "sglang", "algorithms": ["EAGLE", missing]}}
    data = cuda_graph.collect(ProbeContext(options=options, results={"sglang_source": source}))
    assert {l["algorithm"] for l in data["plan"]["launches"]} == {"EAGLE"}
    assert "%s not launched: sglang 0.5.5 has no %s" % (missing, missing) in data["notes"]
