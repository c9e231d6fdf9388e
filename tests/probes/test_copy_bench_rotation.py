"""copy_bench on 8 GPUs with a budget too short for every workload: each GPU first measures the workloads the
cost per decode step reads (one per path), then walks the rest of the grid from its own place, so different GPUs
lose different field sets, every workload is measured somewhere, and each GPU's result says what it lost and the
time it would have needed. Driven with a fake torch.cuda and a fake clock (no GPU, no tensors)."""
import types

from probes import copy_bench
from probes.copybench import bench, budget, devices, workloads
from probes.copybench.devices import InstalledLoader

GPUS = 8
UUIDS = ["00000000-0000-0000-0000-00000000000%d" % i for i in range(GPUS)]


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now


class FakeCuda(object):
    """What bench_one asks of torch.cuda on a GPU that passed its idle check."""

    def __init__(self):
        self.devices_set = []

    def get_device_properties(self, index):
        return types.SimpleNamespace(name="NVIDIA H200", uuid=UUIDS[index], major=9, minor=0,
                                     total_memory=143771 << 20)

    def set_device(self, index):
        self.devices_set.append(index)

    def Event(self, **kwargs):
        return object()

    def set_per_process_memory_fraction(self, fraction, index):
        assert 0 < fraction <= 1

    def max_memory_allocated(self, index):
        return 0

    memory_allocated = max_memory_allocated

    def reset_peak_memory_stats(self, index):
        pass

    def synchronize(self, index=None):
        pass

    def empty_cache(self):
        pass


def drive(monkeypatch, seconds):
    clock = Clock()
    monkeypatch.setattr(budget.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(devices.time, "time", lambda: clock.now)

    def measure(self, record, specs, path, threshold):
        clock.now += 1.0
        return record("ok")

    monkeypatch.setattr(bench.DeviceBench, "_measure", measure)
    monkeypatch.setattr(bench.DeviceBench, "sweep", lambda self, until=None: [])
    fake_torch = types.SimpleNamespace(cuda=FakeCuda())
    monkeypatch.setitem(__import__("sys").modules, "torch", fake_torch)
    idle = [{"index": i, "uuid": "GPU-" + UUIDS[i], "memory_used_mib": 1, "processes": []} for i in range(GPUS)]
    job = {"device": "cuda", "gpus": list(range(GPUS)), "budget_s": seconds, "strategies": ["loop"],
           "topk": 4, "steps": 3, "draft_tokens": 8, "hidden_dtype": "bfloat16",
           "paths": list(workloads.PATHS), "batch_sizes": [1, 32], "hidden_sizes": [4096], "h2d": False,
           "max_mem_mib": 2048, "unit_s": copy_bench.PROBE["unit_s"], "busy_memory_mib": 1024, "force": False,
           "gpu_policy": copy_bench.gpu_policy({"devices": idle, "source": "env"}, [], False, 1024, GPUS)}
    results = devices.bench_all(job)
    assert fake_torch.cuda.devices_set == list(range(GPUS))
    return results, workloads.workload_grid(job["paths"], job["batch_sizes"], job["hidden_sizes"])


def test_a_short_budget_loses_different_field_sets_on_different_gpus(monkeypatch):
    results, grid = drive(monkeypatch, seconds=GPUS * 5.0)   # each GPU: the 3 priority workloads and 2 more
    assert len(grid) > 5 and [r["status"] for r in results] == ["ok"] * GPUS
    first = [workloads.workload_name(*cell) for cell in workloads.priority_cells(grid)]
    assert first == ["eagle_draft/bs32/h4096", "eagle_draft_extend/bs32/h4096", "dflash_verify/bs32"]
    measured = [set(w["name"] for w in r["workloads"] if w["status"] == "ok") for r in results]
    assert all(len(m) == 5 and set(first) <= m for m in measured)        # Q5's workloads on every GPU
    assert all([w["name"] for w in r["workloads"]][:3] == first for r in results)
    assert len(set(frozenset(m) for m in measured)) > 1                 # not the same others everywhere
    names = set(workloads.workload_name(*cell) for cell in grid)
    assert set().union(*measured) == names                               # every workload measured on some GPU
    lost_sets = set(tuple(r["lost_field_sets"]) for r in results)
    assert len(lost_sets) > 1                                            # different GPUs lose different sets
    for result, kept in zip(results, measured):
        assert set(result["lost_to_budget"]) == names - kept             # each GPU says what it lost
        lost = [w for w in result["workloads"] if w["status"] == "skipped"]
        assert all(w["needs_s"] == 1.0 and w["reason"] == "time budget spent" for w in lost)   # the measured unit
        assert result["time_needed_s"] == len(lost)
        assert result["workload_order"]["first"] == workloads.workload_name(*grid[result["workload_order"]["offset"]])
    assert [r["workload_order"]["offset"] for r in results] == [i * len(grid) // GPUS for i in range(GPUS)]


def test_a_budget_shorter_than_one_workload_still_measures_one(monkeypatch):
    results, grid = drive(monkeypatch, seconds=0.3)   # under the declared 0.5 s of one workload
    first, rest = results[0], results[1:]
    assert [w["status"] for w in first["workloads"]].count("ok") == 1 and first["workloads"][0]["status"] == "ok"
    # The first GPU's workload ran past the budget: the others measure nothing and say what it would take, at
    # the declared cost of a workload (nothing was measured on them).
    for result in rest:
        assert {w["status"] for w in result["workloads"]} == {"skipped"}
        assert {w["needs_s"] for w in result["workloads"]} == {0.5} and result["time_needed_s"] == 0.5 * len(grid)


def test_enough_budget_loses_nothing_and_one_gpu_keeps_the_plain_order(monkeypatch):
    results, grid = drive(monkeypatch, seconds=GPUS * (len(grid_len()) + 1))
    assert all(r["lost_to_budget"] == [] and r["lost_field_sets"] == [] for r in results)
    assert results[0]["workload_order"]["offset"] == 0
    assert workloads.rotated_grid(grid, None) == (grid, 0) and workloads.rotated_grid(grid, [3, 1]) == (grid, 0)
    assert InstalledLoader(None, False).get() == ([], [])


def grid_len():
    return workloads.workload_grid(list(workloads.PATHS), [1, 32], [4096])
