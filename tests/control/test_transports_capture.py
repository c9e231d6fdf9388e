"""Bounded capture: the stdout cap, the noise and stderr tails, the frame kept whole; and the local
transport closing a flooding command at the cap."""
import sys
import time

from gpudiag.transports.capture import (
    FRAME_MARKER,
    NOISE_TAIL,
    STDERR_TAIL,
    BoundedCapture,
)
from gpudiag.transports.local import LocalTransport


def test_noise_before_the_frame_is_a_tail_and_the_frame_is_whole():
    capture = BoundedCapture(limit=10 * 2 ** 20)
    for _ in range(100):
        assert capture.add_stdout(b"banner line\n" * 1000)
    frame = FRAME_MARKER + b"n1\n" + b"x" * 500000 + b"\nGPUDIAG-END n1\n"
    for start in range(0, len(frame), 7000):     # the marker may arrive split across chunks
        assert capture.add_stdout(frame[start:start + 7000])
    assert capture.stdout.endswith(b"banner line\n" + frame)
    assert len(capture.stdout) <= NOISE_TAIL + len(FRAME_MARKER) + len(frame)


def test_a_marker_inside_a_line_does_not_start_the_frame():
    capture = BoundedCapture()
    capture.add_stdout(b"echo " + FRAME_MARKER + b"fake\n" + b"y\n" * 100000)
    assert len(capture.stdout) <= NOISE_TAIL + len(FRAME_MARKER)


def test_over_the_cap_nothing_more_is_kept_and_the_reason_names_the_cap():
    capture = BoundedCapture(limit=2 ** 20)
    capture.add_stdout(FRAME_MARKER + b"n\n")
    assert capture.add_stdout(b"z" * (2 ** 20 - 100))
    assert capture.add_stdout(b"z" * 200) is False and capture.overflowed
    assert capture.add_stdout(b"more") is False
    assert len(capture.stdout) <= NOISE_TAIL and capture.describe_overflow() == "output exceeded 1 MiB"


def test_stderr_is_a_bounded_tail():
    capture = BoundedCapture()
    for i in range(20000):
        capture.add_stderr(b"line %06d\n" % i)
    assert len(capture.stderr) == STDERR_TAIL and capture.stderr.endswith(b"line 019999\n")


def test_local_transport_closes_a_flood_at_the_cap():
    started = time.monotonic()
    result = LocalTransport().run([sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('y\\n' * 4096)"],
                                  b"", 60, output_limit=4 * 2 ** 20)
    assert result.overflow == "output exceeded 4 MiB" and result.exit_code is None
    assert time.monotonic() - started < 30 and len(result.stdout) <= NOISE_TAIL + 64


def test_local_transport_feeds_large_stdin_while_reading_both_streams():
    data = b"d" * (3 * 2 ** 20)
    code = "import sys; d = sys.stdin.buffer.read(); sys.stderr.write('e' * 200000); " \
           "sys.stdout.write('GPUDIAG-BEGIN n\\n' + str(len(d)) + '\\n'); sys.exit(3)"
    result = LocalTransport().run([sys.executable, "-c", code], data, 60)
    assert result.exit_code == 3 and result.stdout == b"GPUDIAG-BEGIN n\n3145728\n"
    assert result.stderr == b"e" * STDERR_TAIL
