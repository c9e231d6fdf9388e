"""forked_map: results in order and the same as a plain map, whatever the workers do (raise, send what cannot be
pickled, die, never start), and no worker left behind however the caller leaves."""

import os
import signal

import pytest

from gpudiag.cli import forked_map as fm
from gpudiag.cli.forked_map import forked_map


def children():
    """This process's children started since the test began, from the kernel (zombies included): what
    forked_map must leave none of (children other fixtures started are not counted)."""
    return sorted(set(_all_children()) - BEFORE)


BEFORE: set = set()


@pytest.fixture(autouse=True)
def _children_before():
    BEFORE.clear()
    BEFORE.update(_all_children())


def _all_children():
    me = os.getpid()
    found = []
    for task in os.listdir(f"/proc/{me}/task"):
        try:
            with open(f"/proc/{me}/task/{task}/children") as fh:
                found += [int(pid) for pid in fh.read().split()]
        except FileNotFoundError:
            pass
    return found


PARENT = os.getpid()


def in_worker():
    return os.getpid() != PARENT


def test_results_come_in_order_from_the_workers():
    items = list(range(23))
    pids = list(forked_map(lambda n: (n * n, os.getpid()), items, 3))
    assert [square for square, _ in pids] == [n * n for n in items]
    assert len({pid for _, pid in pids}) == 3 and os.getpid() not in {pid for _, pid in pids}
    assert children() == []


def test_one_worker_or_one_item_runs_here():
    assert list(forked_map(lambda n: os.getpid(), [1, 2, 3], 1)) == [os.getpid()] * 3
    assert list(forked_map(lambda n: os.getpid(), [1], 4)) == [os.getpid()]
    assert list(forked_map(lambda n: n, [], 4)) == []


def test_an_item_that_raises_in_its_worker_raises_here_as_itself():
    def function(n):
        if n == 5:
            raise KeyError(f"item {n} on {'a worker' if in_worker() else 'the parent'}")
        return n

    with pytest.raises(KeyError, match="item 5 on the parent"):
        list(forked_map(function, list(range(10)), 2))
    assert children() == []


def test_a_result_that_cannot_be_pickled_is_computed_here():
    results = list(forked_map(lambda n: (lambda: (n, in_worker())), list(range(6)), 2))
    assert [r() for r in results] == [(n, False) for n in range(6)]


def test_the_items_of_a_worker_that_dies_are_done_here():
    def function(n):
        if n == 4 and in_worker():
            os.kill(os.getpid(), signal.SIGKILL)  # as the kernel's OOM killer would
        return n, in_worker()

    results = list(forked_map(function, list(range(12)), 2))
    assert [n for n, _ in results] == list(range(12))
    # Worker 1 had 0, 2, 4, 6, ...: it sent 0 and 2, died on 4; the rest of its share was done here.
    assert [here for n, here in results if n % 2 == 0] == [True, True, False, False, False, False]
    assert all(here for n, here in results if n % 2)
    assert children() == []


def test_workers_that_cannot_be_forked_leave_their_items_here(monkeypatch):
    real_fork, forks = os.fork, []

    def fork_once():
        if forks:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(fm.os, "fork", fork_once)
    results = list(forked_map(lambda n: (n, in_worker()), list(range(6)), 3))
    assert results == [(0, True), (1, False), (2, False), (3, True), (4, False), (5, False)]
    assert children() == []


def test_leaving_early_ends_and_reaps_every_worker():
    started = forked_map(lambda n: n, list(range(50)), 2)
    assert next(started) == 0
    assert len(children()) == 2
    started.close()  # the caller stopped reading: an error in its own work, or Ctrl-C
    assert children() == []


def test_ctrl_c_while_waiting_ends_the_workers():
    import time

    def slow(n):
        if in_worker():
            time.sleep(30)
        return n

    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            list(forked_map(slow, list(range(4)), 2))
        assert time.monotonic() - started < 5
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert children() == []


def wait_for(path, seconds=10):
    import time

    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.exists()


def test_beside_runs_its_function_in_a_process_of_its_own_while_the_body_runs(tmp_path):
    from gpudiag.cli.forked_map import beside

    go, mark = tmp_path / "go", tmp_path / "written"

    def write():  # waits for the body: only a function running beside the body can see this file
        if wait_for(go):
            mark.write_text(str(os.getpid()))

    with beside(write, fork=True):
        go.touch()
        assert wait_for(mark)  # written while the body runs
    assert int(mark.read_text()) != os.getpid()
    assert children() == []
    mark.unlink()
    with beside(write, fork=False):
        assert not mark.exists()  # without a fork: here, after the body
    assert int(mark.read_text()) == os.getpid()


def test_beside_raises_here_what_its_function_raised_there():
    from gpudiag.cli.forked_map import beside

    def fail():
        raise OSError(28, f"No space left on device ({'a fork' if in_worker() else 'here'})")

    with pytest.raises(OSError, match=r"\(here\)"):
        with beside(fail, fork=True):
            pass
    assert children() == []


def test_ctrl_c_in_the_body_ends_the_process_beside_it():
    import time

    from gpudiag.cli.forked_map import beside

    with pytest.raises(KeyboardInterrupt):
        with beside(lambda: time.sleep(30), fork=True):
            assert len(children()) == 1
            raise KeyboardInterrupt
    assert children() == []


def test_a_body_that_fails_lets_the_process_beside_it_finish_its_file(tmp_path):
    from gpudiag.cli.forked_map import beside

    go, mark = tmp_path / "go", tmp_path / "written"

    def write():
        if wait_for(go):
            mark.write_text("whole")

    with pytest.raises(KeyError):
        with beside(write, fork=True):
            go.touch()
            raise KeyError("the findings failed")
    assert mark.read_text() == "whole" and children() == []


class Unloadable(Exception):
    """Pickles, but its __init__ wants two arguments where pickle gives one: it does not load back."""

    def __init__(self, a, b):
        super().__init__(f"{a}-{b}")


def test_a_result_that_does_not_load_here_is_computed_here():
    results = list(forked_map(lambda n: (Unloadable(n, in_worker()) if n == 3 else n), list(range(6)), 2))
    assert results[:3] == [0, 1, 2] and results[4:] == [4, 5]
    assert str(results[3]) == "3-False"  # computed in the parent


def pipe_fds():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"))
        except OSError:
            pass
    return sum(found)


def test_a_worker_holds_no_other_worker_s_pipe():
    before = pipe_fds()
    counts = list(forked_map(lambda n: pipe_fds(), list(range(4)), 4))
    assert counts == [before + 1] * 4  # what this process had, and its own write end


def test_usable_cpus_is_held_to_the_cgroup_quota(tmp_path):
    from gpudiag.cli.forked_map import usable_cpus

    affinity = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cpus(tmp_path) == affinity
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a CPU: one worker
    assert usable_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text(f"{150000 * affinity} 100000\n")  # more than the affinity allows
    assert usable_cpus(tmp_path) == affinity
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")  # cgroup v1: one CPU
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cpus(tmp_path) == 1
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert usable_cpus(tmp_path) == affinity
