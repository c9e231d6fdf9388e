"""The kernel's records a host keeps about its processes and GPUs: OOM-killer lines, read after the probe
runner died of SIGKILL, and NVIDIA Xid lines, read by the env probe in every light scan (`xid_events`).

The OOM reader is not a probe: the control side starts it on its own (gpudiag/oom_check.py) through the same transport, once,
after a killed runner. It reads the first kernel log it can (`dmesg`, then `journalctl -k`, then the syslog
kernel files), each under a time and byte limit (probes/log_read.py), keeps only the lines that speak of the OOM killer, and
prints them in one frame. `parse_oom_kills` reads those lines; the control side runs it, here it only
needs the markers. Standard library only, Python 3.9+.

Timestamps are asked for on the kernel's own clock (plain `dmesg`, `journalctl -o short-monotonic`, not
`dmesg --ctime`): the runner announces its start on CLOCK_MONOTONIC, the clock printk stamps with, so a
kill from before the run (a recycled pid) is told apart without trusting the wall clock.
"""
import re

from probes.log_read import read_log, run_tail

COMMAND_TIMEOUT = 8.0  # seconds per source
MAX_BYTES = 4 * 2**20  # of one source's output (its newest part) or a log file's tail
MAX_LINES = 200  # OOM lines sent back, newest kept
MAX_LINE = 600  # characters of one line sent back
JOURNAL_LINES = 200
LOG_FILES = ("/var/log/kern.log", "/var/log/messages")

# A line is the OOM killer's when it holds one of these (kernels from 4.x to 6.x).
OOM_MARK = re.compile(r"Killed process \d+|oom-kill:|invoked oom-killer|oom_reaper: reaped process")

# `[ 7063.247407] ` or `<3>[39291577.009543] `: the kernel's own seconds since boot, where a line has them.
_CLOCK = re.compile(r"\[\s*(\d+\.\d+)\]")
# `Out of memory: Killed process 1234 (python3) total-vm:…kB, anon-rss:…kB` and `Memory cgroup out of memory:
# Killed process …`; kernels before 5.x print `Killed process 1234 (python), UID 1000, total-vm:…`.
# The name is the task's comm in parentheses, which may hold parentheses itself: `((resolved))`.
_KILLED = re.compile(r"(?P<cgroup>Memory cgroup out of memory: )?Killed process (?P<pid>\d+) "
                     r"\((?P<name>.{1,64}?)\)(?=[, ]|$)(?P<rest>.*)")
_SIZE = re.compile(r"\b(total-vm|anon-rss|file-rss|shmem-rss):([\d,]+)kB")
# `oom-kill:constraint=CONSTRAINT_NONE,…,task=python3,pid=1234,uid=0`
_OOM_KILL = re.compile(r"oom-kill:(?P<fields>\S+)")


def parse_oom_kills(lines):
    """The kills the lines record, one dict per pid in log order: pid, process, scope ("cgroup" for a memory
    cgroup's limit, else "system"), sizes in kB (total_vm_kb, anon_rss_kb, file_rss_kb, shmem_rss_kb),
    constraint and memcg when an `oom-kill:` line names them, clock_s (seconds since boot) and the line."""
    kills = {}
    for raw in lines:
        line = str(raw)[:MAX_LINE]
        clock = _CLOCK.search(line)
        seen = {"clock_s": float(clock.group(1))} if clock else {}
        killed = _KILLED.search(line)
        if killed:
            seen.update(pid=int(killed.group("pid")), process=killed.group("name"),
                        scope="cgroup" if killed.group("cgroup") else "system", line=line[killed.start():].strip())
            for key, size in _SIZE.findall(killed.group("rest")):
                seen[key.replace("-", "_") + "_kb"] = int(size.replace(",", ""))
        else:
            found = _OOM_KILL.search(line)
            if not found:
                continue
            fields = dict(part.split("=", 1) for part in found.group("fields").split(",") if "=" in part)
            if not fields.get("pid", "").isdigit():
                continue
            seen.update(pid=int(fields["pid"]), process=fields.get("task", "")[:64])
            for key in ("constraint", "task_memcg"):
                if fields.get(key):
                    seen[key if key != "task_memcg" else "memcg"] = fields[key][:200]
            if fields.get("constraint") == "CONSTRAINT_MEMCG":
                seen["scope"] = "cgroup"
        kills.setdefault(seen["pid"], {}).update(seen)  # the oom-kill line and its Killed line: one record
    return list(kills.values())


# `NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...`; drivers before R450
# print the device without `PCI:`.
XID_MARK = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\):\s*(?P<xid>\d+)\s*,?\s*(?P<text>.*)")
MAX_XIDS = 100  # Xid lines sent back, newest kept


def parse_xids(lines):
    """[{pci, xid, text, clock_s?}] of the Xid lines among `lines`, in log order, newest MAX_XIDS kept."""
    found = []
    for raw in lines:
        line = str(raw)[:MAX_LINE]
        match = XID_MARK.search(line)
        if not match:
            continue
        event = {"pci": match.group("pci").lower(), "xid": int(match.group("xid")), "text": match.group("text").strip()}
        clock = _CLOCK.match(line.strip())
        if clock:
            event["clock_s"] = float(clock.group(1))
        found.append(event)
    return found[-MAX_XIDS:]


def xid_events(timeout=COMMAND_TIMEOUT):
    """{"source", "events", "since": "boot"} from this boot's kernel log (`dmesg`, else `journalctl -k`, which
    both hold this boot only), or {"source": None, "events": [], "reasons"} when neither could be read.
    Log files are not read: they mix earlier boots, and an Xid fixed by a reboot is no finding."""
    reasons = []
    sources = [("dmesg", ["dmesg"]),
               ("journalctl -k", ["journalctl", "-k", "--no-pager", "-o", "short-monotonic"])]
    for label, argv in sources:
        lines, why = _command_source(label, argv, timeout)
        if lines is not None:
            return {"source": label, "since": "boot", "events": parse_xids(lines), "reasons": reasons}
        reasons.append(why)
    return {"source": None, "since": None, "events": [], "reasons": reasons}


def read_file_tail(path, max_bytes=MAX_BYTES, seconds=COMMAND_TIMEOUT):
    """(text of the file's last `max_bytes`, None) or (None, why it could not be read)."""
    try:
        return read_log(path, seconds, max_bytes).text, None
    except OSError as exc:
        return None, "%s: %s" % (path, exc.strerror or exc)


def _command_source(label, argv, timeout=COMMAND_TIMEOUT):
    found = run_tail(argv, timeout, MAX_BYTES)
    text = found.data.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("-- ", "Hint: "))]
    if found.code == 0 and lines:
        return lines, None
    if found.code == 0:
        return None, "%s: printed no kernel lines%s" % (label, " (%s)" % found.error if found.error else "")
    return None, found.error or "%s: exit %s" % (label, found.code)


def oom_lines():
    """{"source", "lines"} from the first kernel log that could be read, or {"source": None, "reasons"}."""
    reasons = []
    sources = [("dmesg", ["dmesg"]),
               ("journalctl -k", ["journalctl", "-k", "-n", str(JOURNAL_LINES), "--no-pager", "-o", "short-monotonic"])]
    for label, argv in sources:
        lines, why = _command_source(label, argv)
        if lines is not None:
            return {"source": label, "lines": _oom_only(lines)}
        reasons.append(why)
    for path in LOG_FILES:
        text, why = read_file_tail(path)
        if text is not None:
            return {"source": path, "lines": _oom_only(text.splitlines())}
        reasons.append(why)
    return {"source": None, "reasons": reasons}


def _oom_only(lines):
    return [line[:MAX_LINE] for line in lines if OOM_MARK.search(line)][-MAX_LINES:]


def main(payload):
    """Entry for the bootstrap: one frame with what `oom_lines` found."""
    from probes.runner import error_data, write_frame  # the runner's framing: one format for every frame
    try:
        found = oom_lines()
    except Exception as exc:  # never a missing frame: the control side reads the reason
        error = error_data(exc)
        found = {"source": None, "reasons": ["reading the kernel log failed: %s: %s" % (error["type"], error["message"])]}
    document = {"schema": 1, "kernel_log": found}
    write_frame(document, str(payload.get("nonce") or "0"), 1)
    return 0
