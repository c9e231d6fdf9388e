"""sglang mode inside the probe's time limit: the readiness wait and request traffic are cut to the time
left, batch sizes without time are skipped cells, and the probe returns before its deadline, server killed."""
import os
import stat
import sys
import time

from probes import cuda_graph
from probes.context import ProbeContext
from probes.graphrepro import sglang_repro
from tests.probes.test_cuda_graph_support import STANDIN_SERVER, wait_group_empty

FAKE_SGLANG = r'''#!%(python)s
import os, sys
args = sys.argv[1:]
with open(%(pids)r, "a") as fh:
    fh.write("%%d\n" %% os.getpgrp())
sys.argv = ["standin", %(mode)r, args[args.index("--port") + 1]]
exec(compile(open(%(standin)r).read(), "standin", "exec"))
'''


def fake_sglang(tmp_path, mode):
    standin = tmp_path / "standin.py"
    standin.write_text(STANDIN_SERVER)
    fake = tmp_path / ("python-sglang-" + mode)
    pids = tmp_path / "groups.txt"
    fake.write_text(FAKE_SGLANG % {"python": sys.executable, "standin": str(standin), "mode": mode,
                                   "pids": str(pids)})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return str(fake), pids


def small_margins(monkeypatch):
    monkeypatch.setattr(sglang_repro, "MIN_REQUEST_SECONDS", 1.0)
    monkeypatch.setattr(sglang_repro, "AFTER_REQUESTS_SECONDS", 3.0)


def launch(tmp_path, python, seconds, sizes):
    deadline = time.monotonic() + seconds
    settings = cuda_graph.settings_from({"layers": 2})
    cells = sglang_repro.run_launch(settings, "EAGLE", sizes, 3, str(tmp_path), python, None, dict(os.environ),
                                    None, "", lambda: max(0.0, deadline - time.monotonic()))
    return cells, deadline


def groups_gone(pids):
    return all(wait_group_empty(int(p)) for p in pids.read_text().split())


def test_requests_get_only_the_time_left_and_later_batch_sizes_are_skipped(tmp_path, monkeypatch):
    small_margins(monkeypatch)
    python, pids = fake_sglang(tmp_path, "hang_on_request")
    cells, deadline = launch(tmp_path, python, 9.0, [1, 2, 4])
    assert time.monotonic() < deadline + 2.0   # a 180 s request timeout would hold it for minutes
    assert cells[0]["status"] == "hang" and "no answer" in cells[0]["detail"]
    assert [c["status"] for c in cells[1:]] == ["skipped", "skipped"]
    assert cells[1]["detail"] == "time budget spent before batch size 2"
    assert groups_gone(pids)


def test_the_readiness_wait_is_cut_to_the_time_left_and_is_not_called_a_hang(tmp_path, monkeypatch):
    small_margins(monkeypatch)
    python, pids = fake_sglang(tmp_path, "hang")
    started = time.monotonic()
    cells, _ = launch(tmp_path, python, 4.0, [1, 4])
    assert time.monotonic() - started < 8.0   # not the 30 s floor, not READY_TIMEOUT
    assert [c["status"] for c in cells] == ["skipped", "skipped"]
    assert cells[0]["detail"].startswith("time budget spent while waiting for the server to be ready")
    assert groups_gone(pids)


def test_the_probe_returns_before_its_deadline_with_the_cells_it_has(tmp_path, monkeypatch):
    small_margins(monkeypatch)
    monkeypatch.setattr(cuda_graph, "RESERVE_SECONDS", 2.0)
    monkeypatch.setattr(cuda_graph, "MIN_CELL_SECONDS", 4.0)
    python, pids = fake_sglang(tmp_path, "hang_on_request")
    deadline = time.monotonic() + 12.0
    ctx = ProbeContext(deadline=deadline, results={"sglang_source": {"speculative_algorithms": ["DFLASH"]}})
    settings = cuda_graph.settings_from({"algorithms": ["DFLASH"], "batch_sizes": [1, 2], "draft_tokens": [2, 8]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, dict(os.environ), "", python)
    assert time.monotonic() < deadline
    assert data["cells"] and data["cells"][0]["status"] == "hang"
    spent = [c for c in data["cells"] if c["status"] == "skipped"]
    assert spent and all(c["detail"].startswith("time budget spent") for c in spent)
    assert groups_gone(pids)
