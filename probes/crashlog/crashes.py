"""Finds the crashes in a log: Python tracebacks (chained ones joined), fatal native errors, signals,
watchdog timeouts and bare exception lines, each kept per stream so `[TP0]…[TP7]` interleaving never
mixes two ranks' tracebacks.
"""
import re

from probes.crashlog import markers

TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
FAULTHANDLER = re.compile(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):")
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<func>[\w<>.]+)')
CHAIN = re.compile(r"^(During handling of the above exception|The above exception was the direct cause)")
# An exception line as Python prints it: a dotted name ending in Error/Exception/Exit/Interrupt, maybe a message.
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)|"
                            r"OutOfResources)\b(?::.*)?$"
                            r"|^(?:Exception(?! raised from )|KeyboardInterrupt|AssertionError)\b.*$")
# What an exception line looks like when EXCEPTION_LINE does not name it (`torch._dynamo.exc.BackendCompilerFailed:
# …`): a dotted name whose last part is capitalised, then nothing or a message. A frame's code line never does.
EXCEPTION_SHAPE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::.*)?$")
# Lines that show a crash even without a traceback before them.
MARKERS = re.compile("|".join((
    r"Fatal Python error",
    r"Segmentation fault",
    r"\bSIG(?:SEGV|ABRT|BUS|ILL|KILL)\b",
    r"Aborted \(core dumped\)",
    r"terminate called after throwing",
    r"Received sigquit from a child proces",      # "proces." in early-2025 releases (0.4.3)
    r"Child process unexpectedly failed with an exit code",
    r"Error occurred when running GEMM",          # TRT-LLM's and FlashInfer's GEMM runners (sm100)
    r"Piecewise CUDA Graph failed",
    r"Watchdog caught collective operation timeout",
    r"watchdog (?:thread terminated|got stuck|timeout)",
    r"^\[?PG ID .*watchdog: ",
    r"^ERROR: +\[Errno \d+\]",
    r"Initialization failed\.",
    r"^Killed$",
    markers.CUDA_FAILURE, markers.COLLECTIVE_MARKER)), re.IGNORECASE)
# Lower-case pieces of which every MARKERS match holds one: other lines are not searched with MARKERS.
MARKER_TOKENS = ("fatal python error", "segmentation fault", "sig", "aborted (core dumped)", "terminate called",
                 "received sigquit", "pg id", "errno", "initialization failed", "killed", "unexpectedly failed",
                 "running gemm", "piecewise cuda graph failed") + markers.TOKENS
# Words on every line that can start or end a crash (see MARKERS and EXCEPTION_LINE); other lines are read
# only while a crash is open.
CANDIDATE_WORDS = ("Traceback", "most recent call", 'File "', "Error", "error", "ERROR", "Exception", "Exit",
                   "Interrupt", "Failure", "Fatal", "fault", "SIG", "Abort", "abort", "terminate called", "sigquit",
                   "atchdog", "Killed", "Initialization failed", "core dumped", "KeyboardInterrupt", "unexpectedly failed",
                   "Graph failed") + markers.WORDS
ATTACH_WITHIN = 40      # a marker this many lines after a crash of the same stream belongs to it
TAIL_LINES = 8          # message lines kept after an exception line ("Possible solutions", CUDA hints)


class Crash(object):
    def __init__(self, stream, first):
        self.stream = stream
        self.lines = [first]
        self.frames = []          # (file, line, function), outermost first, across chained tracebacks
        self.exception = None     # the last exception line (the one that ended the process)
        self.tail = 0             # message lines still to take after the exception line
        self.open = True          # inside a traceback: frames and code lines still belong here

    @property
    def first_line(self):
        return self.lines[0].number

    @property
    def last_line(self):
        return self.lines[-1].number

    @property
    def exception_or_earlier(self):
        return self.exception or next((ln for ln in reversed(self.lines) if EXCEPTION_LINE.match(ln.text.strip())), None)

    def text(self):
        return "\n".join(line.text for line in self.lines)


def _is_continuation(text):
    return not text.strip() or text[:1].isspace() or text.lstrip().startswith(("^", "~"))


def _frames_before(recent):
    """The frame lines (each with the code lines under it) just above a bare exception line: a traceback
    whose head was cut off. Indented lines with no frame above them (a wrapped command line) stop it."""
    taken, index = [], len(recent) - 1
    while index >= 0:
        line = recent[index]
        if FRAME.match(line.text):
            taken.append(line)
            index -= 1
            continue
        start = index
        while start >= 0 and not FRAME.match(recent[start].text) and recent[start].text[:1].isspace() \
                and index - start < 3:
            start -= 1
        if start < 0 or not FRAME.match(recent[start].text):
            break
        taken.extend(recent[start + 1:index + 1][::-1])
        index = start
    return list(reversed(taken))


def find_crashes(lines, candidates=None, tokened=None):
    """Crashes in order of their first line. `lines` come from normalize.logical_lines; `candidates`, when
    given, holds the numbers of the lines CANDIDATE_WORDS match, `tokened` those MARKER_TOKENS match (both
    found once over the whole text)."""
    crashes, active, recent = [], {}, {}
    busy = False
    for line in lines:
        if candidates is not None and not busy and line.number not in candidates:
            continue
        _step(line, crashes, active, recent, tokened)
        busy = _busy(active, line.number)
    return crashes


def _step(line, crashes, active, recent, tokened=None):
    owner = _interleaved_owner(active, line)
    if owner is not None:
        line.stream = owner       # a traceback line printed after another rank's record header
    before = recent.setdefault(line.stream, [])
    before.append(line)
    del before[:-ATTACH_WITHIN]
    crash = active.get(line.stream)
    if crash is not None and line.header:
        crash.tail = 0            # a new record of the same stream ends the message lines
    text = line.text
    starts = TRACEBACK.search(text) or FAULTHANDLER.search(text)
    if crash is not None and crash.open and not starts:
        if _take_traceback_line(crash, line):
            return
    if starts:
        if crash is not None and crash.open and crash.exception is None:
            crash.lines.append(line)      # a chained traceback after "During handling of …"
            return
        if crash is not None and not crash.open and crash.exception is not None and \
                line.number - crash.last_line <= 2 and _chained(crash):
            crash.lines.append(line)
            crash.open = True
            return
        _open_traceback(line, crashes, active)
        return
    if crash is not None and crash.tail > 0 and not line.header and text.strip():
        crash.lines.append(line)
        crash.tail -= 1
        if CHAIN.match(text):
            crash.open = True
            crash.exception = None
        return
    if FRAME.match(text):
        _open_traceback(line, crashes, active)    # frames with their header cut off: a crash all the same
        return
    marked = (line.number in tokened and MARKERS.search(text) is not None) if tokened is not None else is_marker(text)
    if marked or (not line.header and EXCEPTION_LINE.match(text.strip()) and
                                not text[:1].isspace()) or (line.header and EXCEPTION_LINE.match(text)):
        if crash is None or line.number - crash.last_line > ATTACH_WITHIN:
            crash = crashes[-1] if crashes else None     # the parent reporting a child's crash
        if crash is not None and line.number - crash.last_line <= ATTACH_WITHIN:
            crash.lines.append(line)
            if EXCEPTION_LINE.match(text.strip()):
                crash.exception = crash.exception or line
            return
        crash = Crash(line.stream, line)
        crash.open = False
        if EXCEPTION_LINE.match(text.strip()):
            crash.exception = line
            crash.tail = TAIL_LINES
            head = _frames_before(before[:-1])
            crash.lines[:0] = head
            crash.frames = [_frame(ln) for ln in head if FRAME.match(ln.text)]
        crashes.append(crash)
        active[line.stream] = crash


def _open_traceback(line, crashes, active):
    """A traceback (or its first frame) begins: it continues the fault lines just above it, when there are
    some (`CUDA error: …` or device asserts printed before the exception, a fatal signal before faulthandler's
    dump, the parent's sigquit printed before the child's traceback), else it is a crash of its own."""
    last = crashes[-1] if crashes else None
    if last is not None and not last.open and last.exception is None and not last.frames and \
            _same_writer(last.stream, line.stream) and line.number - last.last_line <= ATTACH_WITHIN and \
            any(markers.FAULT.search(ln.text) or is_marker(ln.text) for ln in last.lines):
        crash = last
        crash.lines.append(line)
        crash.stream, crash.open, crash.tail = line.stream, True, 0
    else:
        crash = Crash(line.stream, line)
        crashes.append(crash)
    if FRAME.match(line.text):
        crash.frames.append(_frame(line))
    active[line.stream] = crash


def is_marker(text):
    """Whether the line shows a crash on its own (MARKERS), cheaply for the lines that cannot."""
    low = text.lower()
    return any(token in low for token in MARKER_TOKENS) and MARKERS.search(text) is not None


def _same_writer(untagged, stream):
    """Whether lines of `untagged` (no rank: stderr of the same container or process) may belong to `stream`."""
    return untagged in ("", stream) or stream.startswith(untagged + "/")


def _busy(active, number):
    """Whether some stream's crash may still take the next line (an open traceback, or message lines)."""
    return any(c.open or (c.tail > 0 and number - c.last_line <= 2 * TAIL_LINES) for c in active.values())


def _interleaved_owner(active, line):
    """The stream whose open traceback a header-less frame line continues, when its own stream has none."""
    if line.header or not FRAME.match(line.text) and not (line.text[:1].isspace() and line.text.strip()):
        return None
    own = active.get(line.stream)
    if own is not None and own.open:
        return None
    open_elsewhere = [c for c in active.values() if c.open and c.exception is None]
    return open_elsewhere[-1].stream if len(open_elsewhere) == 1 else None


def _chained(crash):
    return any(CHAIN.match(line.text) for line in crash.lines[-3:])


def _frame(line):
    frame = FRAME.match(line.text)
    return frame.group("file"), int(frame.group("line")), frame.group("func")


def _take_traceback_line(crash, line):
    """True when the line belongs to the open traceback of its stream."""
    text = line.text
    frame = FRAME.match(text)
    if frame:
        crash.lines.append(line)
        crash.frames.append((frame.group("file"), int(frame.group("line")), frame.group("func")))
        return True
    if CHAIN.match(text):
        crash.lines.append(line)
        crash.exception = None
        return True
    if _is_continuation(text) and not line.header:
        crash.lines.append(line)
        return True
    if crash.exception is None and not line.header and FRAME.match(crash.lines[-1].text) and \
            not EXCEPTION_SHAPE.match(text.strip()):
        crash.lines.append(line)          # an unindented code line under its frame (a dedented quote)
        return True
    if crash.exception is None and text.strip():
        crash.lines.append(line)          # the exception line closes the traceback
        crash.exception = line
        crash.open = False
        crash.tail = TAIL_LINES
        return True
    crash.open = False
    return False
