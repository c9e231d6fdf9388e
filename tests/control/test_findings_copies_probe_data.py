"""Copy findings fed with what the copy_bench probe really stores (a tiny CPU run), timings edited to the
case under test, so a key the probe and the finding spell differently cannot hide a finding."""
import copy
import json
import sys

import pytest

pytest.importorskip("torch")

from gpudiag.findings import hidden_states  # noqa: E402
from gpudiag.models import HostResult, ProbeResult  # noqa: E402
from probes import copy_bench  # noqa: E402
from probes.context import ProbeContext  # noqa: E402

TINY = {"device": "cpu", "paths": ["eagle_draft"], "batch_sizes": [2, 4], "hidden_sizes": [64],
        "sweep_min_bytes": 1024, "sweep_max_bytes": 4096, "samples": 3, "target_us": 20, "max_iters": 5,
        "strategies": ["loop", "grouped_foreach", "grouped_foreach_size_split"],
        "split_bytes": 256}   # hidden_states (2 or 4 rows of 64 bf16) leaves the foreach group


@pytest.fixture(scope="module")
def probe_data():
    # This Python chosen as deployment would choose it: a live server elsewhere on the machine is not this test's.
    chosen = {"deployment": {"interpreter": {"path": sys.executable, "why": "default"}}}
    data = copy_bench.collect(ProbeContext(options={"copy_bench": dict(TINY)}, results=chosen))
    return json.loads(json.dumps(data))   # as stored


def as_cuda_host(data, split_us):
    """The CPU run relabelled as GPU 0, with the split strategy's median set per workload."""
    data = copy.deepcopy(data)
    data["device"] = "cuda"
    gpu = data["gpus"][0]
    gpu.update(index=0, device="cuda", name="NVIDIA H200")
    for workload in gpu["workloads"]:
        workload["strategies"]["grouped_foreach"].update(median_us=10.0, cv=0.01, noisy=False)
        workload["strategies"]["grouped_foreach_size_split"].update(median_us=split_us[workload["batch_size"]],
                                                                  cv=0.01, noisy=False)
    return HostResult(name="h1", status="ok", probes={"copy_bench": ProbeResult(status="ok", data=data)})


def test_a_split_slower_than_one_group_is_found_in_real_probe_data(probe_data):
    [bs2] = [w for w in probe_data["gpus"][0]["workloads"] if w["batch_size"] == 2]
    split_off = [f for f in bs2["fields"] if f.get("size_split") != "foreach"]
    assert [f["name"] for f in split_off] == ["hidden_states"]
    [finding] = hidden_states.hidden_states_split([as_cuda_host(probe_data, {2: 15.0, 4: 8.0})])
    assert finding.id == "copies.split_wrong_for_gpu"
    assert finding.evidence[0].table[1:] == (("0", "eagle_draft/bs2/h64", "256 B", "10.0 µs", "15.0 µs", "CPU issue"),)
    assert "at least 512 B" in finding.recommendation


def test_a_split_that_wins_in_real_probe_data_is_silent(probe_data):
    assert hidden_states.hidden_states_split([as_cuda_host(probe_data, {2: 8.0, 4: 8.0})]) == []
