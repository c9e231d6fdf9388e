"""Where a log stands in CUDA-graph capture, from the lines sglang prints around it: the capture start and
end lines of every release and graph (target, draft, draft extend, piecewise, breakable, prefill, decode,
verify, single-CG draft extend, Frozen-KV MTP), tqdm's "Capturing batches" bars (100% is a finished
capture, not a hung one), and the server coming up (0.2-0.3 print no end line).

Messages read from the releases' own sources (0.2.15 to 0.5.23): "Capture cuda graph begin.", "Capture draft
cuda graph end.", "Capture draft extend cuda graph begin (step N).", "Capture target decode CUDA graph
begin.", "Capture piecewise CUDA graph end.", "Capture single-CG draft extend begin.", ….
"""
import re

# "Capture" and at most five words (the graph's name) before "begin" or "end" ("Capture cuda graph failed"
# and "Capture the draft worker's own cuda graphs" are neither), or tqdm's bar. One literal start, "Captur",
# so the whole log is scanned at memchr speed.
CAPTURE_EVENT = re.compile(r"Captur(?:e (?P<name>(?:[A-Za-z][\w'-]* ){0,5}?)(?P<edge>begin|end)\b|"
                           r"ing batches \([^)\n]*\):\s*(?P<percent>\d{1,3})%)")
# The server coming up (classify.READY's lines) also ends every capture: 0.2-0.3 print no end line.


class Event(object):
    __slots__ = ("number", "stream", "begins", "name", "bar")     # name None: the server serves (ends captures)

    def __init__(self, number, stream, begins, name, bar):
        self.number, self.stream, self.begins, self.name, self.bar = number, stream, begins, name, bar


def capture_events(found_lines, ready_lines=()):
    """Events of the (line, match) pairs CAPTURE_EVENT found and of the lines where the server came up, in
    order: a start or end line, a progress bar (a bar at 100% ends the capture it draws; one below it shows a
    capture under way, begin line or not), the server up (ends every capture of its stream)."""
    merged = sorted(list(found_lines) + [(line, None) for line in ready_lines], key=lambda pair: pair[0].number)
    events, since = [], set()     # since: streams with a capture event after their last serving event
    for line, found in merged:
        if found is not None and found.group("percent") and int(found.group("percent")) < 100 and events and \
                events[-1].bar and events[-1].begins and events[-1].stream == line.stream:
            continue              # the same capture still drawing its bar
        if found is None:
            # Only the first serving line after capture events matters.
            if since if line.stream == "" else (line.stream in since or "" in since):
                events.append(Event(line.number, line.stream, False, None, False))
            since.difference_update(since.copy() if line.stream == "" else _aliases(line.stream))
            continue
        since.add(line.stream)
        if found.group("edge"):
            events.append(Event(line.number, line.stream, found.group("edge") == "begin",
                                found.group("name").strip().lower(), False))
        else:
            events.append(Event(line.number, line.stream, int(found.group("percent")) < 100, "", True))
    return events


def open_captures(events, before=None):
    """{stream: [(first line, name), …]} of the captures still open before line `before` (all, when None)."""
    opened = {}
    for event in events:
        if before is not None and event.number >= before:
            break
        _apply(opened, event)
    return dict((stream, started) for stream, started in opened.items() if started)


def _apply(opened, event):
    own = opened.setdefault(event.stream, [])
    if event.name is None:
        for stream in (_aliases(event.stream) if event.stream else list(opened)):
            opened[stream] = []
    elif event.bar:
        anywhere = [s for s, started in opened.items() if started]
        if event.begins and not anywhere:
            own.append((event.number, "batches"))      # a bar with no begin line: capture under way
        elif not event.begins:
            _close(opened, event.stream if own else _latest(opened))
    elif event.begins:
        own.append((event.number, event.name))
    elif own:
        _close(opened, event.stream, event.name)


def _latest(opened):
    found = [(started[-1][0], stream) for stream, started in opened.items() if started]
    return max(found)[1] if found else None


def _close(opened, stream, name=None):
    started = opened.get(stream) or []
    for index in range(len(started) - 1, -1, -1):
        if name is None or started[index][1] == name:
            del started[index]
            return
    if started:
        started.pop()


def capture_unfinished(lines, events):
    """The first line of a capture that began and never ended (a log that stops mid-capture), or None."""
    still = open_captures(events)
    if not still:
        return None
    return lines[min(started[0][0] for started in still.values()) - 1]


def capture_open_at(events, crashes):
    """For each crash, whether a capture was open when it began: in its own stream (torch's rankN is sglang's
    TPN), or in its writer's untagged stream (tqdm bars, a launcher); for an untagged crash, in any stream.
    One pass over the events for all crashes."""
    order = sorted(range(len(crashes)), key=lambda i: crashes[i].first_line)
    out, opened, at = [False] * len(crashes), {}, 0
    for index in order:
        crash = crashes[index]
        while at < len(events) and events[at].number < crash.first_line:
            _apply(opened, events[at])
            at += 1
        if crash.stream == "":
            out[index] = any(opened.values())
        else:
            out[index] = any(opened.get(stream) for stream in _aliases(crash.stream))
    return out


def _aliases(stream):
    """The stream, torch's `[rankN]` as sglang's `TPN` (and back), and the untagged stream of its writer."""
    wrapper, _, own = stream.rpartition("/")
    root = wrapper + "/" if wrapper else ""
    names = [stream, wrapper]
    for mine, theirs in (("rank", "TP"), ("TP", "rank")):
        if own.startswith(mine) and own[len(mine):].isdigit():
            names.append(root + theirs + own[len(mine):])
    return names
