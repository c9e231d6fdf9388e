"""The prefixes that log collectors and launchers put before each line of sglang's output, taken off before
any rule reads the line, and the stream each one names (so two services' or pods' tracebacks never mix).

    llm0-1  | …                          docker compose (v2 "name-N", v1 "name_N"), padded to one width
    [llm0]    | …                        podman-compose
    [pod/sglang-0/server] …              kubectl logs --prefix
    Mar 07 10:00:00 gpu-1 sglang[4242]: …  journald (short and short-iso), syslog
    2025-07-25T07:53:08.2174+08:00 stdout F …   the kubelet's container log files (CRI)
    2025-07-25T07:53:08.217487081Z …     docker logs --timestamps
    [2025-02-27T16:30:43.486750Z] …      collectors that bracket an RFC 3339 time
    (SGLangEngine pid=952, ip=10.0.0.1) …  Ray actors
    2025-03-07 10:00:00,123 - name - INFO - …, 2025-06-19T08:18:45.701Z ERROR name: …, INFO 02-22 08:52:08
    file.py:190] …, ERROR:root:…         Python logging formats of supervising scripts
    │ … │                                k9s and other terminal frames
    > …                                  a log quoted in markdown (GitHub, mail), nested quotes too
    2025-07-01T00:57:53+08:00<TAB>…      log exports that put the time and a tab before each line (Loki)
    [2025-11-25 16:01:47] [/bin/sh@<0,0>]: …   job launchers that tag each line with the process and its slot
"""
import re

_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_LEVEL = r"(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
# Each alternative: (name, pattern); the groups service, pod, unit (or actor and pid) say who wrote the line.
_PREFIXES = (
    ("cri", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d) (?:stdout|stderr) [FP] "),
    ("launcher", r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[(?P<launched>[^\]\s]*@<[\d,]+>)\]: "),
    ("kubectl", r"\[(?P<pod>pod/[^/\]\s]+)/[^\]\s]+\] "),
    ("journald", r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|" + _TIME + r") [\w.-]+ "
                 r"(?P<unit>[^\s\[\]:]+\[\d+\]): "),
    ("logging", _TIME + r" - [\w.]+ - [A-Z]+ - |" + _TIME + r" +" + _LEVEL + r" +[\w.]+: |"
                + _LEVEL + r" \d\d-\d\d \d\d:\d\d:\d\d [\w.]+:\d+\] |" + _LEVEL + r":[\w.]+:"),
    ("compose", r"(?P<service>[A-Za-z0-9][\w.-]*|\[[\w.-]+\]) +\| "),
    ("docker_time", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)(?: |\t)"),
    ("bracket_time", r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\] "),
    ("ray", r"\((?P<actor>[A-Za-z_][\w.:-]*) pid=(?P<pid>\d+)(?:, ip=[\w.:-]+)?\) ?"),
)
PREFIX = re.compile("|".join("(?:%s)" % pattern for _, pattern in _PREFIXES))
FRAME_LEFT = re.compile("^[\u2502\u2503] ?")
# A markdown quote: `> ` (or a bare `>` on an empty quoted line), nested; never `>>>` (a Python prompt).
QUOTE = re.compile(r"^(?:> ?)+(?!>)")
FRAME_RIGHT = re.compile(" *[\u2502\u2503] *$")
MAX_PREFIXES = 4          # collectors nest (compose + docker timestamps + a script's logger) but not deeply


def strip(line):
    """(the line without its collectors' prefixes, the stream they name: "llm0-1", "pod/sglang-0",
    "sglang[4242]", "SGLangEngine:952", joined by "/" when nested, or "")."""
    if line[:1] == "[" and line[5:6] == "-" and line[11:12] == " " and line[20:23] != "] [":
        return line, ""           # sglang's own dated record header: the bulk of a log, no collector's prefix
    if line[:1] == ">" and line[:3] != ">>>":
        line = QUOTE.sub("", line, count=1)
    if line[:1] in "\u2502\u2503":
        line = FRAME_RIGHT.sub("", FRAME_LEFT.sub("", line))
    streams = []
    for _ in range(MAX_PREFIXES):
        found = PREFIX.match(line)
        if found is None or not found.end():
            break
        name = (found.group("service") or "").strip("[]") or found.group("pod") or found.group("unit") or \
            (found.group("launched") or "").rpartition("/")[2]
        if found.group("actor"):
            name = "%s:%s" % (found.group("actor"), found.group("pid"))
        if name:
            streams.append(name)
        line = line[found.end():]
    return line, "/".join(streams)
