"""Orchestrator with fake transports: a result for every host whatever fails, a bounded pool and a bounded
window of hosts in its hands, the per-host deadline, and stop()/Ctrl-C closing open transports while finished hosts are kept."""
import json
import threading
import time


from gpudiag.models import CommandResult, Host
from gpudiag.orchestrator import WINDOW_PER_FORK, Orchestrator, ScanRequest
from gpudiag.probe_data import fitted
from gpudiag.transports import TransportError


def frame_for(stdin):
    payload = json.loads(stdin)
    doc = {"schema": 1, "python": {"executable": "/usr/bin/python3"},
           "probes": {"env": {"status": "ok", "duration_s": 0.01, "data": fitted("env", {"hostname": "h"})}}}
    return f"banner\nGPUDIAG-BEGIN {payload['nonce']}\n{json.dumps(doc)}\nGPUDIAG-END {payload['nonce']}\n".encode()


class FakeTransport:
    """Behaviour by host name: ok, slow (until closed), raise:<status>, crash, timeout."""
    live = 0
    peak = 0
    lock = threading.Lock()

    def __init__(self, host, delay=0.0):
        self.host, self.delay = host, delay
        self.closed = threading.Event()

    def run(self, argv, stdin, timeout, output_limit=None, events=None):
        with FakeTransport.lock:
            FakeTransport.live += 1
            FakeTransport.peak = max(FakeTransport.peak, FakeTransport.live)
        try:
            kind = self.host.name.split("-")[0]
            if kind == "slow":
                if self.closed.wait(30):
                    raise TransportError("interrupted", "closed")
            if kind == "raise":
                raise TransportError("auth_failed", "server refused every key offered")
            if kind == "crash":
                raise RuntimeError("bug in a transport")
            if kind == "timeout":
                return CommandResult(None, b"partial", b"", timeout, timed_out=True)
            time.sleep(self.delay)
            stderr = b""
            if events is not None:   # what a runner streams while its probes run, and a line of its own
                nonce = json.loads(stdin)["nonce"]
                stderr = events.feed(b"GPUDIAG-EVENT %s {\"probe\": \"env\", \"step\": \"probe\", "
                                     b"\"state\": \"started\", \"i\": 1, \"n\": 1}\nown line\n" % nonce.encode())
            return CommandResult(0, frame_for(stdin), stderr, self.delay)
        finally:
            with FakeTransport.lock:
                FakeTransport.live -= 1

    def close(self):
        self.closed.set()


def hosts(*names):
    return [Host(name=n, address=n, transport="ssh") for n in names]


def test_every_host_gets_a_result_whatever_fails():
    opened = []

    def factory(host):
        if host.name == "badfactory":
            raise ValueError("unknown transport")
        opened.append(FakeTransport(host))
        return opened[-1]

    outcome = Orchestrator(ScanRequest(probes=["env"], timeout=7), factory).run(
        hosts("ok-1", "raise-1", "crash-1", "timeout-1", "badfactory"))
    got = {r.name: (r.status, r.reason) for r in outcome.results}
    assert [r.name for r in outcome.results] == ["ok-1", "raise-1", "crash-1", "timeout-1", "badfactory"]
    assert got["ok-1"] == ("ok", "")
    assert got["raise-1"] == ("auth_failed", "server refused every key offered")
    assert got["crash-1"] == ("internal_error", "gpudiag bug while handling this host: RuntimeError: bug in a transport")
    assert got["timeout-1"][0] == "timeout" and "7 s deadline" in got["timeout-1"][1]
    assert got["badfactory"] == ("unreachable", "cannot reach it this way: unknown transport")
    assert all(t.closed.is_set() for t in opened)          # every transport closed after its run
    assert outcome.interrupted is False


def test_pool_is_bounded_by_forks():
    FakeTransport.live = FakeTransport.peak = 0
    names = [f"ok-{i}" for i in range(12)]
    outcome = Orchestrator(ScanRequest(probes=["env"], forks=3), lambda h: FakeTransport(h, delay=0.05)).run(
        hosts(*names))
    assert all(r.status == "ok" for r in outcome.results)
    assert FakeTransport.peak == 3


def test_hosts_finished_faster_than_they_are_stored_wait_in_a_bounded_window():
    # Hosts that answer at once and a slow on_result (a store): the pool must not run ahead through the whole
    # fleet, holding every finished result until the main thread gets to it.
    started, ahead = [], []

    def on_result(result):
        ahead.append(len(started) - len(ahead))  # hosts started but not yet handed on, this one included
        time.sleep(0.01)

    outcome = Orchestrator(ScanRequest(probes=["env"], forks=2), FakeTransport,
                           on_start=started.append, on_result=on_result).run(hosts(*[f"ok-{i}" for i in range(40)]))
    assert [r.status for r in outcome.results] == ["ok"] * 40
    # The window (two hosts per fork), and the next host handed over as this one is stored.
    assert len(ahead) == 40 and max(ahead) <= WINDOW_PER_FORK * 2 + 1


def test_stop_closes_open_transports_and_keeps_finished_hosts():
    done = []
    orchestrator = Orchestrator(ScanRequest(probes=["env"], forks=4), FakeTransport,
                                on_result=lambda r: done.append(r.name))

    def stop_when_fast_hosts_finished():
        while len(done) < 2:
            time.sleep(0.01)
        orchestrator.stop()

    threading.Thread(target=stop_when_fast_hosts_finished, daemon=True).start()
    started = time.monotonic()
    outcome = orchestrator.run(hosts("ok-1", "slow-1", "ok-2", "slow-2"))
    assert time.monotonic() - started < 5
    assert {r.name: r.status for r in outcome.results} == {"ok-1": "ok", "ok-2": "ok", "slow-1": "interrupted",
                                                            "slow-2": "interrupted"}


def test_ctrl_c_in_the_main_loop_interrupts_the_run():
    opened = []

    def factory(host):
        opened.append(FakeTransport(host))
        return opened[-1]

    def on_result(result):
        raise KeyboardInterrupt   # as if Ctrl-C arrived while the first result was being handled

    outcome = Orchestrator(ScanRequest(probes=["env"], forks=2), factory, on_result=on_result).run(
        hosts("ok-1", "slow-1", "slow-2", "slow-3"))
    assert outcome.interrupted is True
    statuses = {r.name: r.status for r in outcome.results}
    assert statuses["slow-1"] == statuses["slow-2"] == statuses["slow-3"] == "interrupted"
    assert all(t.closed.is_set() for t in opened)


def test_events_reach_the_callback_with_their_host():
    seen = []
    outcome = Orchestrator(ScanRequest(probes=["env"], forks=2), FakeTransport,
                           on_event=lambda host, event: seen.append((host.name, event.probe, event.state))).run(
        hosts("ok-1", "ok-2"))
    assert sorted(seen) == [("ok-1", "env", "started"), ("ok-2", "env", "started")]
    assert all(r.status == "ok" for r in outcome.results)


def test_a_probe_whose_data_misfits_is_that_probes_error_when_the_frame_arrives():
    """Judged as the frame is classified: the misfit probe is an error naming the field, the others are kept, and
    the host stays reachable (the verdict calls it incomplete)."""
    from gpudiag.models import Host
    from gpudiag.models import CommandResult
    from gpudiag.orchestrator import classify
    doc = {"schema": 1, "python": {"executable": "/usr/bin/python3"},
           "probes": {"env": {"status": "ok", "duration_s": 0.1, "data": fitted("env", {"hostname": "h"})},
                      "cuda_graph": {"status": "ok", "duration_s": 0.2,
                                     "data": fitted("cuda_graph", {"environment": {"torch": None,
                                                                                   "cuda_available": None}})}}}
    stdout = f"GPUDIAG-BEGIN n1\n{json.dumps(doc)}\nGPUDIAG-END n1\n".encode()
    result = classify(Host(name="h", address="localhost", transport="local"),
                      CommandResult(exit_code=0, stdout=stdout, stderr=b"", duration_s=0.3), "n1", 60)
    assert result.status == "ok"
    assert result.probes["env"].status == "ok"
    graph = result.probes["cuda_graph"]
    assert graph.status == "error" and graph.error["type"] == "ProbeDataError"
    assert "probes.cuda_graph.data.environment.cuda_available" in graph.error["message"]
    assert result.reason.startswith("cuda_graph: its data does not fit")
