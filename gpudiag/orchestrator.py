"""Runs the probe bundle on many hosts at once and returns a HostResult for every host.

A bounded pool, a deadline per host, progress through callbacks (no printing here): hosts starting and
finishing, and the progress events a host streams while its probes run. One host's
failure never stops the others; Ctrl-C closes every open transport and keeps what has finished.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from gpudiag import bundle, oom_check
from gpudiag.host_status import transport_name, classify
from gpudiag.models import (
    INTERNAL_ERROR,
    INTERRUPTED,
    OK,
    UNREACHABLE,
    Host,
    HostResult,
    ProbeResult,
)
from gpudiag.transports import Transport, TransportError, container_logs, transport_for
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT
from gpudiag.transports.events import EventReader, HostEvent

DEFAULT_FORKS = 32
DEFAULT_TIMEOUT = 300.0
WINDOW_PER_FORK = 2  # hosts in the pool's hands per worker: one running, one finished and waiting to be stored

TransportFactory = Callable[[Host], Transport]
EventCallback = Callable[[Host, HostEvent], None]


@dataclass
class ScanRequest:
    probes: list[str] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT  # whole-host deadline, connect included
    probe_timeout: float | None = None  # per probe, inside the runner
    forks: int = DEFAULT_FORKS
    probe_timeouts: dict[str, float] = field(default_factory=dict)  # per named probe, over probe_timeout
    output_limit: int = DEFAULT_OUTPUT_LIMIT  # stdout bytes a host may send before it is cut off


@dataclass
class ScanOutcome:
    results: list[HostResult]
    interrupted: bool = False


def runner_budget(deadline: float) -> float:
    """Seconds the runner on the host may spend: the host deadline less room for connecting, starting
    Python and sending the answer back, so a slow probe ends as that probe's timeout, not the host's."""
    return max(1.0, deadline - min(20.0, 0.2 * deadline))


class Orchestrator:
    def __init__(
        self,
        request: ScanRequest,
        transport_factory: TransportFactory | None = None,
        on_start: Callable[[Host], None] | None = None,
        on_result: Callable[[HostResult], None] | None = None,
        on_event: EventCallback | None = None,
        retain: Callable[[HostResult], HostResult] | None = None,
    ):
        """`retain`: what of each result the outcome keeps once `on_result` has had it (stored it); the whole
        result by default, `summary_only` for a scan whose results live on disk."""
        self.request = request
        self.transport_factory = transport_factory or transport_for
        self.on_start = on_start or (lambda host: None)
        self.on_result = on_result or (lambda result: None)
        self.on_event = on_event
        self.retain = retain or (lambda result: result)
        self._open: dict[str, Transport] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def scan_one(self, host: Host) -> HostResult:
        """Everything for one host; never raises."""
        started = time.monotonic()
        if self._stopping.is_set():
            return _interrupted(host)
        self.on_start(host)
        payload = self._payload(host)
        try:
            result = self._run_bundle(host, payload, started)
        except TransportError as exc:
            result = _not_run(host, exc.status, exc.reason, started)
        except Exception as exc:  # a gpudiag bug: this host says so, the fleet goes on
            status = INTERRUPTED if self._stopping.is_set() else INTERNAL_ERROR
            message = (str(exc).splitlines() or [""])[0][:200]
            reason = f"gpudiag bug while handling this host: {type(exc).__name__}: {message}"
            result = _not_run(host, status, reason, started)
        if self._stopping.is_set() and result.status != OK:
            result = _interrupted(host)
        return result

    def _payload(self, host: Host) -> bundle.Payload:
        """The bundle for this host: the run's options with the host's own interpreter and server log."""
        options = dict(
            self.request.options, python=host.python, python_explicit=host.python_explicit, server_log=host.server_log
        )
        return bundle.build_payload(
            self.request.probes,
            options,
            host=host.name,
            timeouts=self.request.probe_timeouts,
            probe_timeout=self.request.probe_timeout,
            budget_s=runner_budget(self.request.timeout),
            watch_stdin=bool(host.container),  # the container transport holds stdin open (transports/container.py)
        )

    def _run_bundle(self, host: Host, payload: bundle.Payload, started: float) -> HostResult:
        """Runs the bundle through the host's transport and judges what it printed; a TransportError says why
        it could not run. The transport is registered while it runs, so stop() can close it."""
        try:
            transport = self.transport_factory(host)
        except ValueError as exc:  # a host setting no transport can honour (an unknown engine...)
            raise TransportError(UNREACHABLE, f"cannot reach it this way: {exc}") from None
        with self._lock:
            self._open[host.name] = transport
        if self._stopping.is_set():  # stop() ran between the check above and the registration
            transport.close()
        engine_log = None
        oom: dict[str, Any] | None = None
        try:
            command = transport.run(
                bundle.bootstrap_argv(host.python),
                payload.data,
                self.request.timeout,
                output_limit=self.request.output_limit,
                events=self._event_reader(host, payload.nonce),
            )
            if container_logs.wanted(host.container, self.request.probes) and not self._stopping.is_set():
                engine_log = container_logs.fetch(
                    transport, str(host.container), self.request.timeout - (time.monotonic() - started)
                )
            if oom_check.wanted(command) and not self._stopping.is_set():  # was it the OOM killer?
                left = self.request.timeout - (time.monotonic() - started)
                oom = oom_check.follow_up(transport, host, command, payload.nonce, left)
        finally:
            with self._lock:
                self._open.pop(host.name, None)
            transport.close()
        result = classify(host, command, payload.nonce, self.request.timeout)
        result = oom_check.attach(result, command, oom)
        if engine_log is not None:  # the engine's log, read outside the container
            result = container_logs.attach(result, str(host.container), engine_log)
        return result

    def _event_reader(self, host: Host, nonce: str) -> EventReader | None:
        """What reads the host's progress events, when someone listens: no listener, no parsing."""
        on_event = self.on_event
        if on_event is None:
            return None
        return EventReader(nonce, lambda event: on_event(host, event))

    def run(self, hosts: list[Host]) -> ScanOutcome:
        """Every host through the pool. Finished futures arrive on a queue and are dropped once their result
        is handed on: no per-loop walk over every pending host, and no finished result held by its future.

        Hosts are handed to the pool a window at a time, the next one as a result is handed on: workers that
        finish faster than `on_result` stores (hosts that answer at once) would otherwise queue up a whole
        fleet's results in memory, and the process keeps that high-water mark after they are freed."""
        results: dict[str, HostResult] = {}
        workers = max(1, min(self.request.forks, len(hosts) or 1))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpudiag-host")
        finished: queue.SimpleQueue[Future[HostResult]] = queue.SimpleQueue()
        waiting = iter(hosts)

        def submit_next() -> None:
            host = next(waiting, None)
            if host is not None:
                pool.submit(self.scan_one, host).add_done_callback(finished.put)

        remaining = len(hosts)
        interrupted = False
        try:  # a signal while the first hosts are handed out still closes the ones already running
            for _ in range(WINDOW_PER_FORK * workers):  # the hosts running, and as many finished awaiting on_result
                submit_next()
            while remaining:
                try:
                    # A short wait keeps the main thread responsive to Ctrl-C.
                    future = finished.get(timeout=0.2)
                except queue.Empty:
                    continue
                remaining -= 1
                result = future.result()
                del future
                submit_next()  # a worker takes the next host while this one is stored
                self.on_result(result)
                results[result.name] = self.retain(result)  # the full one is on disk: memory stays flat
                del result
        except KeyboardInterrupt:
            interrupted = True
            self.stop()
        finally:
            pool.shutdown(wait=not interrupted, cancel_futures=True)
        ordered = []
        for host in hosts:
            ordered.append(results.get(host.name) or _interrupted(host))
        return ScanOutcome(results=ordered, interrupted=interrupted)

    def stop(self) -> None:
        """Close every open transport: their runs return at once and the hosts end as interrupted."""
        self._stopping.set()
        with self._lock:
            transports = list(self._open.values())
        for transport in transports:
            try:
                transport.close()
            except Exception:
                pass


def summary_only(result: HostResult) -> HostResult:
    """The result without its probes' data, errors and output tails: what a summary table and an exit code
    read (status, reason, time, each probe's status), a few hundred bytes instead of the host's document."""
    probes = {name: ProbeResult(p.status, p.duration_s, reason=p.reason) for name, p in result.probes.items()}
    return replace(result, probes=probes, output_tail=None)


def _not_run(host: Host, status: str, reason: str, started: float) -> HostResult:
    """A host whose bundle could not run, or whose handling failed, with the time it took to find out."""
    return HostResult(
        name=host.name,
        status=status,
        reason=reason,
        address=host.address,
        transport=transport_name(host),
        python=host.python,
        duration_s=time.monotonic() - started,
    )


def _interrupted(host: Host) -> HostResult:
    return HostResult(
        name=host.name,
        status=INTERRUPTED,
        reason="the run was interrupted before this host finished",
        address=host.address,
        transport=transport_name(host),
        python=host.python,
    )
