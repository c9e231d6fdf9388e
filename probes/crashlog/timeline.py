"""Where the server stood at each line of a log: came up, served batches, (re)started. A crash is dated from
the last of these before it: while serving after Prefill or Decode lines (or through the scheduler's loop),
during start-up after start-up lines (or through the frames that build the server), else not shown."""
import bisect
import re

# The scheduler's own serving lines (every release's Prefill and Decode heads), the lines a (re)start prints
# first, and those only a start-up prints: plain substrings, found once (at memchr speed) the first time a crash
# asks, so a log of many serving lines and no crash costs nothing here.
SERVING = ("Decode batch", "Prefill batch")
STARTING = ("server_args=ServerArgs(", "Load weight begin", "Init torch distributed begin")
STARTED = STARTING + ("Load weight end", "Memory pool end", "max_total_num_tokens=", "graph begin",
                      "Capturing batches", "Init torch distributed ends")
# Frames of the server being built: a crash through them is at start-up whatever the log shows before it.
BUILDING = re.compile(r"^(?:__init__|initialize|init_\w+|load_model|run_scheduler_process)$")
UNKNOWN_WHEN = "when is not shown (no start-up or serving line before it)"


class Timeline(object):
    """Where the server stood before a line: came up (the ready lines), served a batch, or (re)started."""

    def __init__(self, ready_lines, index):
        self.ready = ready_lines
        self.index = index
        self._offsets = {}

    def _last(self, words, number):
        """The offset in the log's text of the last of `words` before line `number`, or -1."""
        end = self.index.starts[number - 1] if 0 < number <= len(self.index.starts) else len(self.index.whole)
        if words not in self._offsets:
            whole, found = self.index.whole, []
            for word in words:
                at = whole.find(word)
                while at >= 0:
                    found.append(at)
                    at = whole.find(word, at + 1)
            self._offsets[words] = sorted(found)
        offsets = self._offsets[words]
        at = bisect.bisect_left(offsets, end)
        return offsets[at - 1] if at else -1

    def serving_at(self, number):
        """Whether the server served a batch before line `number` and did not restart since."""
        served = self._last(SERVING, number)
        return served >= 0 and served > self._last(STARTING, number)

    def when(self, number, in_loop=False, building=False):
        """Where a crash sits: a crash followed by a later start-up belongs to an earlier run of the server;
        one after Prefill or Decode lines (and no restart since), or through the scheduler's loop (`in_loop`),
        came while serving, whatever the log shows of the server coming up; one after start-up lines, or
        through the frames that build the server (`building`), during start-up. Else the log does not say."""
        if any(r > number for r in self.ready):
            return "before the server last came up (an earlier run)"
        if in_loop or self.serving_at(number):
            return "while serving"
        if self.ready:
            return "after the server was ready"
        if building or self._last(STARTED, number) >= 0:
            return "during start-up"
        return UNKNOWN_WHEN
