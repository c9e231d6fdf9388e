"""`forked_map`: a function over items in forked worker processes, results in the items' order.

`gpudiag report` derives each chunk of hosts on its own (gpudiag/cli/report_stream.py), a few milliseconds of
pure Python per host: one interpreter is one core. The workers are forked before any item is handed out, so the
function (a closure over the run's manifest) and the items are theirs as the parent holds them, never pickled;
results cross as pickles over one pipe per worker. Item i goes to worker i % workers: chunks cost about the same, and
every worker's results are read as they come, so none waits on another's pipe.

Not multiprocessing: its pools fork from a process that already runs their helper threads, and a worker killed
under a pool leaves the parent waiting. Here an item whose function raised, or whose result cannot be pickled,
is done again in the parent (the error, if any, is raised there as it would be without workers), as are the items
of a worker that could not be started or died; every worker is ended and reaped however the parent leaves (an
error, Ctrl-C).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import pickle
import selectors
import signal
import struct
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_HEADER = struct.Struct("!QB")  # message length, then what it holds:
RESULT, REDO = 1, 2  # a pickled result; none (the function raised, or its result cannot be pickled)
_DO_HERE = object()  # in the parent's queue, in place of a result it computes itself

MOST_WORKERS = 8  # the default's cap: each worker holds a chunk of hosts' data (tens of MiB) while it derives


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The CPUs this process may use: its affinity (taskset, cpusets), within its cgroup's CPU quota (a container's
    --cpus, a Kubernetes limit), which affinity does not show."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cpu_quota(cgroup)
    return max(1, min(cpus, math.ceil(quota))) if quota else cpus


def _cpu_quota(cgroup: Path) -> float | None:
    """CPUs' worth of time the cgroup may use (cgroup v2 cpu.max, v1 cpu.cfs_quota_us); None when unlimited or
    unreadable."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        return None if int(quota) <= 0 else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def forked_map(function: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """function(item) for each item, in order; in up to `workers` forked processes when that is more than one
    and the platform forks, else in this process."""
    workers = min(workers, len(items))
    if workers <= 1 or not hasattr(os, "fork"):
        yield from map(function, items)
        return
    pids: list[int] = []
    pipes: dict[int, int] = {}  # read end -> worker number
    try:
        for number in range(workers):
            read, write = os.pipe()
            # The worker closes this pipe's read end and the earlier workers': they are the parent's alone.
            pid = _forked(functools.partial(_work, function, items[number::workers], write, (read, *pipes)))
            os.close(write)
            if pid is None:  # no more processes to be had: this worker's items are done here
                os.close(read)
                continue
            pids.append(pid)
            pipes[read] = number
        yield from _ordered(function, items, pipes, workers)
    finally:
        _end(pids, pipes)


def _work(function: Callable[[Any], Any], items: Iterable[Any], out: int, not_mine: Iterable[int]) -> None:
    """A worker's work: each item's result (or REDO) written to `out`. Ended early (an error, a closed pipe), the
    parent sees its pipe close and does the rest itself."""
    for fd in not_mine:
        os.close(fd)
    for item in items:
        body, kind = _outcome(function, item)
        _write_all(out, _HEADER.pack(len(body), kind) + body)


def _outcome(function: Callable[[Any], Any], item: Any) -> tuple[bytes, int]:
    """function(item) pickled, or REDO: the parent calls it again itself, so what it raises is raised there with
    its own traceback, and a result that cannot be pickled is still a result."""
    try:
        return pickle.dumps(function(item), protocol=pickle.HIGHEST_PROTOCOL), RESULT
    except Exception:  # noqa: BLE001 - redone by the parent, which sees the error for itself
        return b"", REDO


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _ordered(function: Callable[[T], R], items: Sequence[T], pipes: dict[int, int], workers: int) -> Iterator[R]:
    """Results as the workers send them, handed on in item order (item i is worker i % workers's (i // workers)th);
    an item its worker could not send a result for is done here."""
    count = len(items)
    owed = {number: len(range(number, count, workers)) for number in range(workers)}  # results not yet read
    buffers = {number: bytearray() for number in range(workers)}
    # A worker that never started has nothing to send: its items are done here.
    received: dict[int, list[Any]] = {
        number: [] if number in pipes.values() else [_DO_HERE] * owed[number] for number in range(workers)
    }
    selector = selectors.DefaultSelector()
    for fd in pipes:
        selector.register(fd, selectors.EVENT_READ)
    try:
        for index in range(count):
            number = index % workers
            while not received[number]:
                _read_some(selector, pipes, buffers, received, owed)
            value = received[number].pop(0)
            yield function(items[index]) if value is _DO_HERE else value
    finally:
        selector.close()


def _read_some(
    selector: selectors.BaseSelector,
    pipes: dict[int, int],
    buffers: dict[int, bytearray],
    received: dict[int, list[Any]],
    owed: dict[int, int],
) -> None:
    for key, _ in selector.select():
        fd = int(key.fd)
        number = pipes[fd]
        chunk = os.read(fd, 1 << 20)
        if not chunk:  # done; or died (killed for memory, say): what it still owed is done here
            selector.unregister(fd)
            received[number] += [_DO_HERE] * owed[number]
            owed[number] = 0
            continue
        buffer = buffers[number]
        buffer += chunk
        while len(buffer) >= _HEADER.size:
            size, kind = _HEADER.unpack_from(buffer)
            if len(buffer) < _HEADER.size + size:
                break
            body = bytes(buffer[_HEADER.size : _HEADER.size + size])
            del buffer[: _HEADER.size + size]
            received[number].append(_loaded(body) if kind == RESULT else _DO_HERE)
            owed[number] -= 1


def _loaded(body: bytes) -> Any:
    """A worker's result; _DO_HERE where it pickled but does not load (an exception class whose __init__ takes other
    arguments than it keeps, say): the parent computes it itself."""
    try:
        return pickle.loads(body)
    except Exception:  # noqa: BLE001 - redone here
        return _DO_HERE


def _end(pids: list[int], pipes: dict[int, int]) -> None:
    """Every worker ended (they are done or no longer needed) and reaped; every pipe closed."""
    for fd in pipes:
        os.close(fd)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


@contextlib.contextmanager
def beside(function: Callable[[], None] | None, fork: bool) -> Iterator[None]:
    """function() run in a forked process while the body runs here, and waited for when the body is done; run
    here instead where it could not be forked (or `fork` is False), or where the fork did not finish it (it
    raised, or died): its error, if any, is then raised here as it would be without the fork."""
    pid = _forked(function) if function is not None and fork and hasattr(os, "fork") else None
    try:
        yield
    except Exception:
        if pid:  # let it finish as it would have without the fork (a half-written file helps no one)
            _finished(pid)
        raise
    except BaseException:  # Ctrl-C: stop it too
        _end([pid] if pid else [], {})
        raise
    if function is not None and (pid is None or not _finished(pid)):
        function()


def _finished(pid: int) -> bool:
    """Whether the forked process ended having done its work (exit 0); ended (SIGKILL, reaped) if the wait is cut."""
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    except BaseException:
        _end([pid], {})
        raise


def _forked(function: Callable[[], None]) -> int | None:
    """The pid of a forked process running function() and exiting (0 once it returned, 1 if it raised) without
    running anything this process set up to run at exit; None if none could be forked."""
    try:
        pid = os.fork()
    except Exception:  # noqa: BLE001 - no process to be had: done here
        return None
    if pid == 0:
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C reaches the whole group: the parent reports it
            function()
            code = 0
        except BaseException:  # noqa: BLE001 - what is left is done by the parent, which raises what it raises
            pass
        finally:
            os._exit(code)
    return pid
