"""Pure parsers for /proc and /etc files, and a reader that never raises."""
import re


def read_text(path, limit=1 << 20):
    """A small file's text, or None when it cannot be read (missing, permission, process gone)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def read_bytes(path, limit=1 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except (OSError, ValueError):
        return None


def parse_meminfo(text):
    """/proc/meminfo → {"MemTotal": mib, ...} for every `Name: N kB` line."""
    values = {}
    for line in (text or "").splitlines():
        match = re.match(r"^([A-Za-z0-9_()]+):\s+(\d+)\s*kB\s*$", line.strip())
        if match:
            values[match.group(1)] = int(match.group(2)) // 1024
    return values


def parse_os_release(text):
    """/etc/os-release → {KEY: value} with the quotes removed."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value.strip().strip("\"'")
    return values


def parse_cpu_model(text):
    """The first `model name` (x86) or `Model name`/`CPU part` fallback line of /proc/cpuinfo."""
    for key in ("model name", "Model name", "Hardware", "cpu model"):
        for line in (text or "").splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None
