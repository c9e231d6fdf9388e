"""Bounded capture of what a host prints: memory stays bounded whatever the host sends.

stdout counts against a cap (default 64 MiB); until the frame starts only a short tail of it is kept
(login banners, a `yes` loop), from the frame's first line on everything is kept up to the cap. stderr
is kept as a tail, less the progress events an EventReader takes out of it as they arrive, and the runner's
process announcements (`GPUDIAG-PROCESS`, probes/events.py) are kept whatever the tail drops: after a kill
they name the pids to look for in the kernel's log. Over the cap the caller closes the command and the host
is a frame_error.
"""

from __future__ import annotations

from gpudiag.transports.events import EventReader

DEFAULT_OUTPUT_LIMIT = 64 * 2**20
STDERR_TAIL = 64 * 2**10
NOISE_TAIL = 64 * 2**10  # stdout kept from before the frame starts
FRAME_MARKER = b"GPUDIAG-BEGIN "  # the framing line (gpudiag.bundle); noise before it is not kept
FRAME_END = b"GPUDIAG-END "
PROCESS_MARK = b"GPUDIAG-PROCESS "
MAX_ANNOUNCED = 32  # announcement lines kept apart from the tail
MAX_ANNOUNCEMENT = 1024  # bytes of one (the host writes fewer)


class BoundedCapture:
    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT, events: EventReader | None = None):
        self.limit = limit
        self.events = events
        self.total = 0  # stdout bytes received, kept or not
        self.overflowed = False
        self._noise = bytearray()  # before the frame: a tail only
        self._frame: bytearray | None = None
        self._stderr = bytearray()
        self._stderr_cut = False
        self._announced: list[bytes] = []
        self._pending = b""  # an announcement whose line has not ended yet

    def add_stdout(self, data: bytes) -> bool:
        """Take a chunk; False once the output passed the cap (stop reading and close the command)."""
        if self.overflowed:
            return False
        self.total += len(data)
        if self.total > self.limit:
            self.overflowed = True
            self._frame = None  # nothing over the cap is read: free it at once
            return False
        if self._frame is not None:
            self._frame += data
            return True
        self._noise += data
        start = self._frame_start()
        if start is not None:
            self._frame = bytearray(self._noise[start:])
            del self._noise[start:]
        if len(self._noise) > NOISE_TAIL + len(FRAME_MARKER):
            del self._noise[: len(self._noise) - NOISE_TAIL - len(FRAME_MARKER)]
        return True

    def frame_ended(self) -> bool:
        """The output holds a frame's end line (classify checks it is this run's)."""
        return self._frame is not None and FRAME_END in self._frame

    def _frame_start(self) -> int | None:
        at = self._noise.find(FRAME_MARKER)
        while at != -1:
            if at == 0 or self._noise[at - 1] == 0x0A:  # at the start of a line
                return at
            at = self._noise.find(FRAME_MARKER, at + 1)
        return None

    def add_stderr(self, data: bytes) -> None:
        if self.events is not None:
            data = self.events.feed(data)
        if len(self._announced) < MAX_ANNOUNCED:
            self._keep_announcements(data)
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL:
            del self._stderr[: len(self._stderr) - STDERR_TAIL]
            self._stderr_cut = True

    def _keep_announcements(self, data: bytes) -> None:
        buf, self._pending = self._pending + data, b""
        at = buf.find(PROCESS_MARK)
        while at != -1 and len(self._announced) < MAX_ANNOUNCED:
            line_start = at == 0 or buf[at - 1] == 0x0A
            end = buf.find(b"\n", at)
            if end == -1:
                self._pending = buf[at : at + MAX_ANNOUNCEMENT] if line_start else b""
                return
            if line_start:
                self._announced.append(buf[at : min(end + 1, at + MAX_ANNOUNCEMENT)])
            at = buf.find(PROCESS_MARK, end)
        start = buf.rfind(b"\n") + 1  # a last line that may be the start of a mark cut by the chunk
        if at == -1 and 0 < len(buf) - start < len(PROCESS_MARK) and PROCESS_MARK.startswith(buf[start:]):
            self._pending = buf[start:]

    @property
    def stdout(self) -> bytes:
        return bytes(self._noise) + bytes(self._frame or b"")

    @property
    def stderr(self) -> bytes:
        rest = self.events.rest() if self.events is not None else b""
        kept = b"".join(self._announced) if self._stderr_cut else b""  # cut off the tail: kept in front of it
        return kept + bytes(self._stderr) + rest

    def describe_overflow(self) -> str:
        return f"output exceeded {self.limit / 2**20:g} MiB"
