"""Where the server stood at each line of a log: came up, served batches, (re)started. A crash is dated from
the last of these before it: while serving after Prefill or Decode lines (or through the scheduler's loop),
during start-up after start-up lines (or through the frames that build the server), else not shown."""
import bisect
import re

# The scheduler's own serving lines (every release's Prefill and Decode heads), and the lines a (re)start
# prints first: a crash after serving lines and no restart since is a crash while serving.
SERVING = re.compile(r"\b(?:Prefill|Decode) batch\b")
STARTING = re.compile(r"server_args=ServerArgs\(|Load weight begin|Init torch distributed begin")
# Lines only a start-up prints (besides STARTING): a crash after one of them, before any serving, is at start-up.
STARTED = re.compile(r"Load weight end|Memory pool end|max_total_num_tokens=|Capture [\w -]*?(?:cuda|CUDA) graph begin|"
                     r"Capturing batches|Init torch distributed ends")
# Frames of the server being built: a crash through them is at start-up whatever the log shows before it.
BUILDING = re.compile(r"^(?:__init__|initialize|init_\w+|load_model|run_scheduler_process)$")
UNKNOWN_WHEN = "when is not shown (no start-up or serving line before it)"


class Timeline(object):
    """Where the server stood at each line: the lines where it came up, served a batch, or (re)started."""

    def __init__(self, ready_lines, index):
        self.ready = ready_lines
        self.serving = [ln.number for ln in index.every(SERVING)] if "batch" in index.whole else []
        self.starting = [ln.number for ln in index.every(STARTING)]
        self.started = sorted(self.starting + [ln.number for ln in index.every(STARTED)])

    def serving_at(self, number):
        """Whether the server served a batch before line `number` and did not restart since."""
        served = _last_before(self.serving, number)
        return served is not None and served > (_last_before(self.starting, number) or 0)

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
        if building or _last_before(self.started, number) is not None:
            return "during start-up"
        return UNKNOWN_WHEN


def _last_before(numbers, number):
    at = bisect.bisect_left(numbers, number)
    return numbers[at - 1] if at else None
