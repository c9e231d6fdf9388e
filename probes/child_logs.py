"""What a child wrote on its stderr, quoted when it fails: `LogTail` (a temp file, for children whose stderr
may be long, such as graph capture) and `StderrTail` (the last lines of a pipe, bounded in memory, so a light
probe's child writes nothing to disk). Standard library only.
"""
import collections
import os
import tempfile
import threading

LOG_TAIL_BYTES = 6000


class LogTail(object):
    """A temp file a child's stderr goes to; its tail is quoted when the child fails, then it is removed."""

    def __init__(self, prefix="gpudiag-child-", folder=None):
        fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=folder)
        self.file = os.fdopen(fd, "wb")

    def size(self):
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def tail(self, offset=0, limit=LOG_TAIL_BYTES):
        try:
            with open(self.path, "rb") as fh:
                fh.seek(max(offset, self.size() - limit))
                return fh.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def remove(self):
        try:
            self.file.close()
            os.unlink(self.path)
        except OSError:
            pass


class StderrTail(object):
    """The last lines a child wrote on its stderr pipe, read by a thread, bounded in memory."""

    def __init__(self, proc, lines=20, width=500):
        self.lines = collections.deque(maxlen=lines)
        self.width = width
        self.reader = threading.Thread(target=self._read, args=(proc.stderr,), name="child-stderr", daemon=True)
        self.reader.start()

    def _read(self, stream):
        try:
            for raw in iter(stream.readline, b""):
                text = raw.decode("utf-8", "replace").strip()
                if text:
                    self.lines.append(text[:self.width])
        except (OSError, ValueError):
            pass

    def last(self, count):
        """The last `count` non-empty lines, oldest first."""
        return list(self.lines)[-count:] if count > 0 else []

    def note(self, count=2):
        """` | line | line` to append to a reason, or "" when the child wrote nothing."""
        tail = self.last(count)
        return " | " + " | ".join(t[:300] for t in tail) if tail else ""
