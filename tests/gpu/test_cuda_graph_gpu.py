"""The synthetic CUDA-graph matrix on a real GPU, printed; and child isolation of a poisoned context."""
import os
import time

import pytest

from probes import cuda_graph
from probes.context import ProbeContext
from probes.graphrepro import specs
from probes.boot import local_modules
from probes.graphrepro.worker import Worker
from tests.gpu import limits

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Outcomes a cell may have; "error" (the harness could not run it) and "skipped" are none: they fail the test.
CELL_STATUSES = ("ok", "capture_failed", "replay_failed", "mismatch", "device_fault", "timeout")

POISON = '''
def device_assert(args):
    import torch
    x = torch.zeros(4, device="cuda")
    index = torch.tensor([1000], device="cuda")
    x[index] = 1.0          # out of bounds: a device-side assert poisons this context
    torch.cuda.synchronize()
    return {"status": "ok"}

def capped_allocation(args):
    import torch
    from probes.graphrepro.synthetic import cap_memory
    cap = cap_memory(torch, torch.device("cuda", 0), args["cap_mib"])
    small = torch.empty(args["cap_mib"] // 4 << 20, dtype=torch.uint8, device="cuda")
    try:
        torch.empty(args["cap_mib"] * 2 << 20, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError as exc:
        return {"status": "ok", "cap": cap, "small": small.numel(), "refused": str(exc)[:200]}
    return {"status": "ok", "cap": cap, "small": small.numel(), "refused": None}

def healthy(args):
    import torch
    return {"status": "ok", "sum": float(torch.ones(8, device="cuda").sum().item())}
'''


def test_synthetic_matrix_runs_every_cell_and_prints_it():
    options = {"cuda_graph": {"algorithms": ["EAGLE", "DFLASH"], "batch_sizes": [1, 4, 16, 64],
                              "draft_tokens": [2, 16], "mode": "synthetic", "force": True,
                              "cell_timeout": 180}}
    started = time.monotonic()
    data = cuda_graph.collect(ProbeContext(options=options, deadline=started + 1200))
    print("\n%s, torch %s, foreach copy %s" % (data["gpu"], data["environment"]["torch"],
                                                 data["environment"]["has_foreach_copy"]))
    for cell in data["cells"]:
        print("%-20s bs=%-3d dt=%-3d %-14s diff=%s capture=%ss %s" % (
            cell["path"], cell["batch_size"], cell["draft_tokens"], cell["status"], cell.get("max_abs_diff"),
            cell.get("capture_s"), (cell.get("detail") or "")[:100]))
    for boundary in data["boundaries"]:
        print("boundary:", boundary["text"])
    print("took %.1f s" % (time.monotonic() - started))
    assert data["gpu"]["compute_capability"].startswith("sm_") and data["memory_cap_mib"] == 4096
    assert all(c["memory_cap_mib"] == 4096 and c["estimated_mib"] <= 4096 for c in data["cells"])
    assert {c["path"] for c in data["cells"]} == set(specs.PATHS)
    assert [c for c in data["cells"] if c["status"] not in CELL_STATUSES] == []
    assert all(b["text"] for b in data["boundaries"]) and data["boundary"] is not None
    for cell in data["cells"]:
        if cell["status"] == "ok":
            assert cell["max_abs_diff"] is not None and cell["capture_s"] > 0


def test_a_poisoned_context_stays_in_its_child():
    modules = local_modules()
    modules["poison"] = [False, POISON]
    worker = Worker(modules=modules)
    try:
        assert worker.call("poison:healthy", {}, timeout=limits.CHILD_CALL_S) == {"status": "ok", "sum": 8.0}
        poisoned = worker.call("poison:device_assert", {}, timeout=limits.CHILD_CALL_S)
        print("\npoisoned child:", poisoned["status"], poisoned.get("detail", "")[:200])
        assert poisoned["status"] in ("error", "died")
        worker.close()   # what the probe does after any failed cell
        assert worker.call("poison:healthy", {}, timeout=limits.CHILD_CALL_S) == {"status": "ok", "sum": 8.0}
        assert worker.starts == 2
    finally:
        worker.close()
        worker.remove_logs()


def test_the_memory_cap_refuses_allocations_above_it_in_the_child():
    modules = local_modules()
    modules["poison"] = [False, POISON]
    worker = Worker(modules=modules)
    try:
        result = worker.call("poison:capped_allocation", {"cap_mib": 256}, timeout=limits.CHILD_CALL_S)
        print("\ncapped child:", result)
        assert result["cap"] == 256 and result["small"] == 64 << 20
        assert result["refused"] and "out of memory" in result["refused"].lower()
    finally:
        worker.close()
        worker.remove_logs()


def test_device_info_reports_memory_in_use_and_uuids():
    worker = Worker(modules=local_modules())
    try:
        info = worker.call("probes.graphrepro.synthetic:device_info", {"memory": True}, timeout=limits.CHILD_CALL_S)
    finally:
        worker.close()
        worker.remove_logs()
    assert info["memory_error"] is None and info["devices"]
    for device in info["devices"]:
        assert 0 < device["memory_used_mib"] < device["memory_total_mib"]
        assert device["uuid"].startswith("GPU-")
