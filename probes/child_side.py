"""The child side of probes/child.py's protocol: `watch_parent` (a killed runner takes its children with it) and
`FramedWriter` (answers on the real stdout as `MARK {json}` lines; everything else the child or its libraries print
goes to stderr). Imported by the children alone (torch checks, copy bench, graph worker). Standard library only.
"""
import json
import os
import signal
import sys
import threading
import time

from probes import events


def watch_parent(interval=0.5):
    """If the process that started us dies, take our whole group down with it, even while the main thread
    hangs inside CUDA."""
    parent = os.getppid()

    def loop():
        while os.getppid() == parent:
            time.sleep(interval)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


class FramedWriter(object):
    """Owns the real stdout of a child: fd 1 is pointed at stderr, so only `write` reaches the parent.
    Progress events the child emits (probes/events.py) travel on the same channel under their own mark."""

    def __init__(self, mark):
        self.mark = mark
        self._lock = threading.Lock()   # one whole line at a time, whichever thread writes
        sys.stdout.flush()
        self.fd = os.dup(1)
        os.dup2(2, 1)
        events.relay_through(self)

    def write(self, document):
        self.write_marked(self.mark, document)

    def write_marked(self, mark, document):
        line = (mark + json.dumps(document, default=str, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            while line:
                line = line[os.write(self.fd, line):]


def flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
