"""Pure parsers for nvidia-smi output: the GPU query, compute processes, `topo -m` and the CUDA version.

Each takes the text nvidia-smi printed and returns plain data; tests feed them recorded outputs.
"""
import csv
import re

QUERY_GPU_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used",
                    "utilization.gpu", "driver_version", "compute_cap")
# Drivers before R510 reject `compute_cap` and answer nothing at all: the query is asked again without it.
LEGACY_QUERY_GPU_FIELDS = QUERY_GPU_FIELDS[:-1]
COMPUTE_APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")

# What nvidia-smi prints instead of data when the driver or the device is unhappy.
_FAILURE_MARKERS = ("NVIDIA-SMI has failed", "couldn't communicate with the NVIDIA driver",
                    "Failed to initialize NVML", "Driver/library version mismatch", "Unable to determine",
                    "Insufficient Permissions", "GPU access blocked", "is not a valid field")
NO_DEVICES = "No devices were found"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LINK_KIND = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_TOPO_LABEL = re.compile(r"^(GPU|NIC)\d+$")


class NvidiaSmiError(ValueError):
    """nvidia-smi answered with an error message instead of data; the message is its first line."""


def failure_message(text):
    """The line of an nvidia-smi error message in `text`, or None when the text looks like data."""
    for line in (text or "").splitlines():
        # A bracketed cell such as "[Insufficient Permissions]" is a placeholder inside data, not an error.
        bare = re.sub(r"\[[^\]]*\]", "", line)
        if any(marker in bare for marker in _FAILURE_MARKERS):
            return line.strip()
    return None


def _check_failure(text):
    message = failure_message(text)
    if message:
        raise NvidiaSmiError(message)


def _value(raw):
    """A CSV cell without nvidia-smi's placeholders: '[N/A]', 'N/A', '[Not Supported]' → None."""
    cell = (raw or "").strip()
    if not cell or cell.upper() in ("N/A", "[N/A]") or (cell.startswith("[") and cell.endswith("]")):
        return None
    return cell


def _number(raw, kind=int):
    cell = _value(raw)
    if cell is None:
        return None
    cell = re.sub(r"\s*(MiB|%|W|MHz)$", "", cell)  # in case `nounits` was not honoured
    try:
        return kind(float(cell)) if kind is int else kind(cell)
    except ValueError:
        return None


def sm_name(compute_cap):
    """'9.0' → 'sm_90', '10.3' → 'sm_103', '12.0' → 'sm_120'; None when unknown."""
    cell = _value(compute_cap)
    match = re.match(r"^(\d+)\.(\d+)$", cell or "")
    if not match:
        return None
    return "sm_%d%d" % (int(match.group(1)), int(match.group(2)))


def _csv_rows(text):
    lines = [line for line in (text or "").replace("\r", "").splitlines() if line.strip()]
    return [row for row in csv.reader(lines, skipinitialspace=True) if row]


def rejected_field(text):
    """The field an old driver refused (`Field "compute_cap" is not a valid field to query.`), else None."""
    match = re.search(r'Field\s+"([^"]+)"\s+is not a valid field to query', text or "")
    return match.group(1) if match else None


def parse_query_gpu(text, fields=QUERY_GPU_FIELDS):
    """`--query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,utilization.gpu,driver_version,
    compute_cap --format=csv,noheader,nounits` → list of device dicts. Raises NvidiaSmiError on an error.
    `fields` without compute_cap (LEGACY_QUERY_GPU_FIELDS) reads an old driver's answer: compute_cap None."""
    _check_failure(text)
    if NO_DEVICES in (text or ""):
        return []
    devices = []
    for row in _csv_rows(text):
        if len(row) < len(fields):
            raise NvidiaSmiError("unexpected query-gpu line (%d fields): %s" % (len(row), ", ".join(row)[:200]))
        # A GPU name with a comma would split into extra cells: join the middle back.
        extra = len(row) - len(fields)
        name = ", ".join(cell.strip() for cell in row[1:2 + extra])
        rest = [row[0]] + [name] + row[2 + extra:]
        cap = _value(rest[8]) if len(rest) > 8 else None
        devices.append({
            "index": _number(rest[0]),
            "name": _value(rest[1]),
            "uuid": _value(rest[2]),
            "pci_bus_id": _value(rest[3]),
            "memory_total_mib": _number(rest[4]),
            "memory_used_mib": _number(rest[5]),
            "utilization_pct": _number(rest[6]),
            "driver_version": _value(rest[7]),
            "compute_cap": cap,
            "compute_capability": sm_name(cap),
        })
    return devices


def parse_compute_apps(text):
    """`--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits`
    → list of {gpu_uuid, pid, name, used_memory_mib}. Raises NvidiaSmiError on an error message."""
    _check_failure(text)
    if "No running processes found" in (text or ""):
        return []
    processes = []
    for row in _csv_rows(text):
        if len(row) < len(COMPUTE_APPS_FIELDS):
            continue
        # A process name may hold commas: everything between pid and the last cell is the name.
        name = ", ".join(cell.strip() for cell in row[2:-1])
        processes.append({"gpu_uuid": _value(row[0]), "pid": _number(row[1]), "name": _value(name),
                          "used_memory_mib": _number(row[-1])})
    return processes


def parse_cuda_version(text):
    """The driver's CUDA version from `nvidia-smi` (header) or `nvidia-smi --version`; None if absent."""
    match = re.search(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)", text or "")
    return match.group(1) if match else None


def _topology_header(lines):
    """(index of the header line, its GPU/NIC column labels) or (None, [])."""
    for number, tokens in enumerate(lines):
        if tokens and _TOPO_LABEL.match(tokens[0]) and (len(tokens) == 1 or not _LINK_KIND.match(tokens[1])):
            return number, [t for t in tokens if _TOPO_LABEL.match(t)]
    return None, []


def parse_topology(text):
    """`nvidia-smi topo -m` → {gpus, matrix{GPUi:{GPUj: kind}}, summary, link_counts, affinity, nics}.

    Splits on any whitespace (tabs or spaces), drops ANSI codes, NIC rows and columns, the CPU/NUMA
    affinity columns and the legend. Raises NvidiaSmiError on an error message."""
    _check_failure(text)
    lines = [_ANSI.sub("", line).split() for line in (text or "").replace("\r", "").splitlines()]
    start, columns = _topology_header(lines)
    if start is None:
        return {"gpus": [], "matrix": {}, "summary": "unknown", "link_counts": {}, "affinity": {}, "nics": [],
                "reason": "no GPU header line in the topology output"}
    matrix, affinity, nics = {}, {}, [c for c in columns if c.startswith("NIC")]
    for tokens in lines[start + 1:]:
        if not tokens or not tokens[0].startswith("GPU") or not _TOPO_LABEL.match(tokens[0]):
            continue
        cells = tokens[1:1 + len(columns)]
        row = {}
        for column, cell in zip(columns, cells):
            if column.startswith("GPU"):
                row[column] = cell
        matrix[tokens[0]] = row
        rest = tokens[1 + len(columns):]
        affinity[tokens[0]] = {"cpu": _value(rest[0]) if rest else None,
                               "numa": _value(rest[1]) if len(rest) > 1 else None}
    gpus = [c for c in columns if c.startswith("GPU") and c in matrix]
    summary, counts = summarize_links(gpus, matrix)
    return {"gpus": gpus, "matrix": matrix, "summary": summary, "link_counts": counts, "affinity": affinity,
            "nics": nics}


def summarize_links(gpus, matrix):
    """nvlink (every pair NV#), pcie (no pair NV#), mixed, single (one GPU) or unknown (a pair unreadable)."""
    if len(gpus) == 1:
        return "single", {}
    if not gpus:
        return "unknown", {}
    counts = {}
    for a in gpus:
        for b in gpus:
            if a == b:
                continue
            kind = matrix.get(a, {}).get(b)
            kind = kind if kind and _LINK_KIND.match(kind) else "unknown"
            counts[kind] = counts.get(kind, 0) + 1
    if counts.get("unknown") or counts.get("X"):
        return "unknown", counts
    nvlink = [k for k in counts if k.startswith("NV")]
    if len(nvlink) == len(counts):
        return "nvlink", counts
    if not nvlink:
        return "pcie", counts
    return "mixed", counts
