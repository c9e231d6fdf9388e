"""Pure parsers for the GPU health counters: `nvidia-smi -q` text and `nvidia-smi nvlink -s`.

`-q` is read rather than `--query-gpu`: its sections (ECC, retired pages, remapped rows, clock event reasons,
PCIe link, MIG, fabric) exist on every driver from R450 to R580, while the CSV field names changed
(`clocks_throttle_reasons` became `clocks_event_reasons`) and an unknown field makes the whole query fail.
Its layout is indentation: a `Key : Value` line, or a section title whose lines follow one level deeper.
Each parser takes the text nvidia-smi printed and returns plain data; tests feed them recorded outputs.
"""
import re

_GPU_TITLE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(\S.*?)\s*:\s?(.*)$")
_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: (GPU-[0-9a-fA-F-]+)\))?\s*$")
_NVLINK_LINK = re.compile(r"^Link (\d+): (.*)$")
MAX_GPUS = 64  # a bound on what one host's answer may hold

# `Clocks Event Reasons` (R535+) / `Clocks Throttle Reasons` (older): label → key.
REASONS = {"Idle": "idle", "Applications Clocks Setting": "applications_clocks_setting",
           "SW Power Cap": "sw_power_cap", "HW Slowdown": "hw_slowdown", "HW Thermal Slowdown": "hw_thermal_slowdown",
           "HW Power Brake Slowdown": "hw_power_brake_slowdown", "Sync Boost": "sync_boost",
           "SW Thermal Slowdown": "sw_thermal_slowdown", "Display Clock Setting": "display_clock_setting"}


def parse_tree(text):
    """`nvidia-smi -q` → {"header": {...}, "gpus": [(bus_id, {...})]}: nested dicts, values as printed."""
    header, gpus = {}, []
    stack = [(-1, header)]
    for raw in (text or "").replace("\r", "").splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        title = _GPU_TITLE.match(line) if indent == 0 else None
        if title:
            if len(gpus) >= MAX_GPUS:
                break
            section = {}
            gpus.append((title.group(1), section))
            stack = [(-1, section)]
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        pair = _KEY_VALUE.match(line)
        if pair and pair.group(2).strip():
            parent[pair.group(1)] = pair.group(2).strip()
        else:
            child = {}
            parent[pair.group(1) if pair else line] = child
            stack.append((indent, child))
    return {"header": header, "gpus": gpus}


def _get(tree, *keys):
    for key in keys:
        if not isinstance(tree, dict):
            return None
        tree = tree.get(key)
    return tree


def _section(value):
    """A section as a dict; a hostile or odd answer (`GPU Link Info : N/A`) as an empty one."""
    return value if isinstance(value, dict) else {}


def _text(value):
    """A value without nvidia-smi's placeholders (N/A, [Not Supported], ...)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or value.upper() == "N/A" or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _int(value):
    match = re.match(r"^(\d+)", _text(value) or "")
    return int(match.group(1)) if match else None


def _yes(value):
    value = (_text(value) or "").lower()
    return True if value in ("yes", "active", "enabled") else False if value in ("no", "not active", "disabled") else None


def _sum(values):
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc_counts(block):
    """{corrected, uncorrected} of one ECC block: SRAM/DRAM counters (Ampere and later drivers) or the
    Single/Double Bit totals (older layouts)."""
    if not isinstance(block, dict):
        return {"corrected": None, "uncorrected": None}
    if "Single Bit" in block or "Double Bit" in block:
        return {"corrected": _int(_get(block, "Single Bit", "Total")),
                "uncorrected": _int(_get(block, "Double Bit", "Total"))}
    corrected = [_int(v) for k, v in block.items() if k.endswith("Correctable") and "Uncorrectable" not in k]
    uncorrected = [_int(v) for k, v in block.items() if k.endswith("Uncorrectable")]
    return {"corrected": _sum(corrected), "uncorrected": _sum(uncorrected)}


def _reasons(gpu):
    block = gpu.get("Clocks Event Reasons") or gpu.get("Clocks Throttle Reasons") or gpu.get("Clocks Reasons")
    if not isinstance(block, dict):
        return None
    flat = {}

    def walk(node):
        for label, value in node.items():
            if isinstance(value, dict):  # HW Thermal/Power Brake sit under HW Slowdown on some drivers
                walk(value)
            elif label in REASONS:
                flat[REASONS[label]] = _yes(value)
    walk(block)
    return flat


def _remapped_rows(gpu):
    block = gpu.get("Remapped Rows")
    if not isinstance(block, dict):
        return None  # `Remapped Rows : N/A` before Ampere
    return {"correctable": _int(block.get("Correctable Error")), "uncorrectable": _int(block.get("Uncorrectable Error")),
            "pending": _yes(block.get("Pending")), "failure": _yes(block.get("Remapping Failure Occurred"))}


def health_of(bus_id, gpu):
    """One GPU's health counters from its `-q` section; None wherever the driver says N/A."""
    link = _section(_get(gpu, "PCI", "GPU Link Info"))
    gen, width = _section(link.get("PCIe Generation")), _section(link.get("Link Width"))
    retired = _section(gpu.get("Retired Pages"))
    return {
        "bus_id": bus_id,
        "name": _text(gpu.get("Product Name")),
        "uuid": _text(gpu.get("GPU UUID")),
        "persistence_mode": _text(gpu.get("Persistence Mode")),
        "mig_mode": _text(_get(gpu, "MIG Mode", "Current")),
        "utilization_pct": _int(_get(gpu, "Utilization", "Gpu")),
        "performance_state": _text(gpu.get("Performance State")),
        "pcie": {"gen_current": _int(gen.get("Current")), "gen_max": _int(gen.get("Max")),
                 "gen_device_max": _int(gen.get("Device Max")), "gen_host_max": _int(gen.get("Host Max")),
                 "width_current": _int(width.get("Current")), "width_max": _int(width.get("Max")),
                 "replays": _int(_get(gpu, "PCI", "Replays Since Reset"))},
        "clock_reasons": _reasons(gpu),
        "ecc_mode": _text(_get(gpu, "ECC Mode", "Current")),
        "ecc": {"volatile": _ecc_counts(_get(gpu, "ECC Errors", "Volatile")),
                "aggregate": _ecc_counts(_get(gpu, "ECC Errors", "Aggregate"))},
        "retired_pages": {"single_bit": _int(retired.get("Single Bit ECC")),
                          "double_bit": _int(retired.get("Double Bit ECC")),
                          "pending": _yes(retired.get("Pending Page Blacklist") or retired.get("Pending Page Retirement"))},
        "remapped_rows": _remapped_rows(gpu),
        "reset_required": _yes(_get(gpu, "GPU Reset Status", "Reset Required")),
        "fabric": {"state": _text(_get(gpu, "Fabric", "State")), "status": _text(_get(gpu, "Fabric", "Status"))},
    }


def parse_health(text):
    """`nvidia-smi -q` → {"driver_version", "gpus": [health_of(...)]}."""
    tree = parse_tree(text)
    return {"driver_version": _text(tree["header"].get("Driver Version")),
            "gpus": [health_of(bus_id, gpu) for bus_id, gpu in tree["gpus"]]}


def parse_nvlink_status(text):
    """`nvidia-smi nvlink -s` → [{index, uuid, links, active, inactive}], one per GPU it lists."""
    gpus = []
    for raw in (text or "").replace("\r", "").splitlines():
        line = raw.strip()
        title = _NVLINK_GPU.match(line)
        if title:
            if len(gpus) >= MAX_GPUS:
                break
            gpus.append({"index": int(title.group(1)), "uuid": title.group(3), "links": 0, "active": 0,
                         "inactive": 0})
            continue
        link = _NVLINK_LINK.match(line)
        if link and gpus:
            gpus[-1]["links"] += 1
            if "inactive" in link.group(2).lower():
                gpus[-1]["inactive"] += 1
            else:
                gpus[-1]["active"] += 1
    return gpus
