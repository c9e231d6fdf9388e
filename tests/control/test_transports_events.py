"""Progress events read from a host's stderr: only this run's well-formed events pass, bounded and rate-limited;
everything else stays the host's stderr; frames still parse with events interleaved; the console shows them
safely, live on a terminal and as plain lines elsewhere."""
import io
import json

from rich.console import Console

from gpudiag.engines import frames
from gpudiag.models import Host, HostResult
from gpudiag.render.console import ScanProgress, describe_event
from gpudiag.transports import events as host_events
from gpudiag.transports.capture import STDERR_TAIL, BoundedCapture
from gpudiag.transports.events import BURST, EventReader, HostEvent

NONCE = "abc123"


def line(doc, nonce=NONCE):
    return b"GPUDIAG-EVENT " + nonce.encode() + b" " + json.dumps(doc).encode() + b"\n"


def reader():
    got = []
    return EventReader(NONCE, got.append), got


def test_events_pass_in_order_and_other_stderr_stays():
    events, got = reader()
    kept = events.feed(b"warning: something\n" + line({"probe": "env", "step": "probe", "state": "started",
                                                       "i": 1, "n": 4})
                       + line({"probe": "env", "step": "probe", "state": "finished", "status": "ok",
                               "duration_s": 2.5}) + b"Traceback (most recent call last):\n")
    assert kept == b"warning: something\nTraceback (most recent call last):\n"
    assert got == [HostEvent("env", "probe", "started", i=1, n=4),
                   HostEvent("env", "probe", "finished", status="ok", duration_s=2.5)]


def test_a_line_split_across_chunks_is_joined():
    events, got = reader()
    whole = line({"probe": "copy_bench", "step": "device", "state": "started", "what": "GPU 3"})
    assert events.feed(whole[:10]) == b"" and events.feed(whole[10:25]) == b""
    assert events.feed(whole[25:]) == b"" and got[0].what == "GPU 3"


def test_malformed_foreign_and_hostile_lines_never_become_events():
    events, got = reader()
    bad = [b"GPUDIAG-EVENT " + NONCE.encode() + b" {not json\n",
           b"GPUDIAG-EVENT " + NONCE.encode() + b" [1, 2]\n",
           line({"probe": "env", "step": "format_disk", "state": "started"}),
           line({"probe": "", "step": "probe", "state": "started"}),
           line({"probe": "env", "step": "probe", "state": "exploded"}),
           b"GPUDIAG-EVENT " + NONCE.encode() + b" " + b"[" * 100000 + b"\n",   # deep nesting, over the cap
           b"GPUDIAG-EVENT " + NONCE.encode() + b" \xff\xfe\n"]
    for data in bad:
        events.feed(data)
    assert got == []
    # Another run's nonce is not ours: the line is plain stderr.
    other = line({"probe": "env", "step": "probe", "state": "started"}, nonce="other")
    assert events.feed(other) == other and got == []
    # Types and sizes are checked: counts must be small non-negative ints, strings are capped.
    events.feed(line({"probe": "p" * 10000, "step": "cell", "state": "finished", "i": True, "n": -3,
                      "what": {"nested": 1}, "status": "\x1b]0;owned\x07ok", "duration_s": float("1e308")}))
    (event,) = got
    assert len(event.probe) == host_events.MAX_TEXT and event.i is None and event.n is None
    assert event.what == "" and event.duration_s is None
    shown = describe_event(event)
    assert "\x1b" not in shown and "\x07" not in shown


def test_a_huge_line_is_stderr_not_an_event_and_memory_stays_bounded():
    events, got = reader()
    capture = BoundedCapture(events=events)
    capture.add_stderr(b"GPUDIAG-EVENT " + NONCE.encode() + b" {\"probe\": \"")
    for _ in range(200):
        capture.add_stderr(b"x" * 65536)
    capture.add_stderr(b"\"}\n")
    assert got == [] and len(capture.stderr) <= STDERR_TAIL + host_events.MAX_LINE
    capture.add_stderr(line({"probe": "env", "step": "probe", "state": "started"}))
    assert len(got) == 1                                   # the next line is read as usual


def test_the_stderr_tail_keeps_the_hosts_own_lines_only():
    events, got = reader()
    capture = BoundedCapture(events=events)
    capture.add_stderr(line({"probe": "env", "step": "probe", "state": "started"}) + b"real error\n" + b"unfinish")
    assert capture.stderr == b"real error\nunfinish" and len(got) == 1


def test_a_flood_is_rate_limited_and_a_failing_callback_is_contained():
    got = []
    flood = EventReader(NONCE, got.append)
    one = line({"probe": "env", "step": "probe", "state": "started"})
    flood.feed(one * 20000)
    assert BURST <= len(got) < BURST + 200 and flood.ignored == 20000 - len(got)

    def broken(event):
        raise RuntimeError("display failed")
    quiet = EventReader(NONCE, broken)
    assert quiet.feed(one + b"after\n") == b"after\n" and quiet.ignored == 1


def test_frames_parse_with_events_interleaved_by_an_engine():
    document = {"schema": 1, "host": "n1", "probes": {"env": {"status": "ok", "duration_s": 0.1, "data": {}}}}
    text = json.dumps(document)
    wrapped = [text[i:i + 20] for i in range(0, len(text), 20)]
    event = line({"probe": "env", "step": "probe", "state": "started"}).decode().rstrip("\n")
    child = 'GPUDIAG-CHILD-EVENT {"probe": "x"}'
    # pdsh: every line prefixed; an event lands in the middle of a wrapped frame from a merged stream.
    lines = ["n1: " + event, "n1: GPUDIAG-BEGIN nn"] + ["n1: " + w for w in wrapped[:2]] + ["n1: " + event,
                                                                                            "n1: " + child]
    lines += ["n1: " + w for w in wrapped[2:]] + ["n1: GPUDIAG-END nn", event]
    parsed = frames.parse_text("\n".join(lines) + "\n")
    (frame,) = parsed.frames
    assert frame.document == document and frame.label == "n1"
    assert not any("GPUDIAG-EVENT" in noise for noise in parsed.noise)


def progress(**console_options):
    out = io.StringIO()
    console = Console(file=out, width=200, **console_options)
    return ScanProgress(2, console=console), out


def test_plain_lines_off_a_terminal():
    scan, out = progress()
    host = Host(name="gpu-01\x1b[2J", address="gpu-01")
    with scan:
        scan.host_started(host)
        scan.host_event(host, HostEvent("copy_bench", "device", "started", i=2, n=8, what="GPU 1"))
        scan.host_event(host, HostEvent("copy_bench", "probe", "finished", i=5, n=6, status="ok", duration_s=61.25))
        scan.host_done(HostResult(name="gpu-01", status="ok", reason=""))
    text = out.getvalue()
    assert "gpu-01: copy_bench: device 2/8 GPU 1 started\n" in text
    assert "gpu-01: probe 5/6 copy_bench finished: ok (61.2 s)\n" in text
    assert "\x1b" not in text


def test_a_dumb_terminal_gets_plain_lines(monkeypatch):
    monkeypatch.setenv("TERM", "dumb")
    scan, out = progress(force_terminal=True)
    assert not scan.live
    host = Host(name="h0", address="h0")
    with scan:
        scan.host_event(host, HostEvent("cuda_graph", "cell", "started", i=3, n=12, what="eagle bs=4 draft=8"))
    assert "h0: cuda_graph: cell 3/12 eagle bs=4 draft=8 started" in out.getvalue()


def test_a_terminal_shows_each_running_host_with_its_current_step(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    scan, out = progress(force_terminal=True)
    assert scan.live
    host = Host(name="h[bold]0", address="h0")
    with scan:
        scan.host_started(host)
        scan.host_event(host, HostEvent("copy_bench", "device", "started", i=1, n=8, what="GPU [red]0"))
        scan._progress.refresh()
        shown = out.getvalue()
        scan.host_done(HostResult(name="h[bold]0", status="ok", reason=""))
    assert "h[bold]0" in shown and "copy_bench: device 1/8 GPU [red]0 started" in shown
    assert "h0: copy_bench" not in out.getvalue()     # no plain lines while the display is live


def test_any_chunking_keeps_every_plain_byte_and_finds_every_event():
    import random

    rng = random.Random(7)
    plain = [b"warning: x\n", b"GPUDIAG-EVENTS are not events\n", b"  GPUDIAG-EVENT " + NONCE.encode() + b" {}\n",
             b"no newline yet ", b"GPUDIAG-EV\n", b"\n", b"x" * 5000 + b"\n", "ünïcode\n".encode()]
    event = line({"probe": "env", "step": "probe", "state": "started"})
    pieces = [rng.choice(plain) if rng.random() < 0.7 else event for _ in range(400)]
    stream = b"".join(pieces)
    expected_events = sum(1 for p in stream.splitlines(keepends=True) if p == event)
    expected_kept = b"".join(p for p in stream.splitlines(keepends=True) if p != event)
    for sizes in ([1], [7, 3], [64], [65536], [2049, 1]):
        got: list = []
        events = EventReader(NONCE, got.append)
        events._allowed = lambda: True      # no rate limit here: every event must be found
        kept, at, turn = b"", 0, 0
        while at < len(stream):
            size = sizes[turn % len(sizes)]
            kept += events.feed(stream[at:at + size])
            at, turn = at + size, turn + 1
        kept += events.rest()
        assert kept == expected_kept, sizes
        assert len(got) == expected_events, sizes
