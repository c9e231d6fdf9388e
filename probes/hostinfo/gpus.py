"""GPU inventory for the env probe: nvidia-smi first (never touching CUDA), torch.cuda only without it."""
from probes.context import run_command, which
from probes.hostinfo import nvidia_smi

QUERY_GPU = "--query-gpu=" + ",".join(nvidia_smi.QUERY_GPU_FIELDS)
LEGACY_QUERY_GPU = "--query-gpu=" + ",".join(nvidia_smi.LEGACY_QUERY_GPU_FIELDS)
NO_COMPUTE_CAP = ("this driver's nvidia-smi has no compute_cap field (drivers before R510): compute capability "
                  "unknown here (reading it through torch would initialise CUDA)")
QUERY_APPS = "--query-compute-apps=" + ",".join(nvidia_smi.COMPUTE_APPS_FIELDS)
CSV = "--format=csv,noheader,nounits"


def skipped_gpus(reason, source=None):
    """The `gpus` shape with no devices: readers find every key, whatever the host."""
    return {"status": "skipped", "reason": reason, "source": source, "driver_version": None, "cuda_version": None,
            "count": 0, "devices": [], "processes_error": None}


def skipped_topology(reason):
    return {"status": "skipped", "reason": reason, "gpus": [], "matrix": {}, "summary": "unknown",
            "link_counts": {}, "affinity": {}, "nics": []}


def _smi(binary, args, timeout):
    """(stdout, None) or (None, reason); nvidia-smi prints its errors on stdout, so both are read."""
    result = run_command([binary] + list(args), timeout=timeout)
    if result["ok"] or nvidia_smi.NO_DEVICES in result["stdout"]:  # no GPU exits non-zero: still an answer
        return result["stdout"], None
    message = nvidia_smi.failure_message(result["stdout"]) or nvidia_smi.failure_message(result["stderr"])
    return None, message or result["error"] or "nvidia-smi failed"


def collect_gpus(timeout, torch_fallback=True, python=None, modules=None, run=None):
    """(gpus, topology) dicts in the probe-data shape; a host without GPUs gives two `skipped` dicts.
    Without nvidia-smi, torch.cuda reads the devices: in a child of `python` (the host's chosen interpreter,
    with the bundle's `modules`; the torch child of `run`, the probe runner's results) when given, so the
    probes' own process never imports torch."""
    binary = which("nvidia-smi")
    if binary is None:
        if not torch_fallback:
            reason = "nvidia-smi not found on PATH"
            return skipped_gpus(reason), skipped_topology(reason)
        if python:
            return gpus_from_torch_child(python, modules, timeout, run)
        return gpus_from_torch()
    devices, error, legacy = query_gpus(binary, timeout)
    if error is not None:
        # A hung or failing nvidia-smi would fail the same way again: ask it nothing more.
        return skipped_gpus(error, "nvidia-smi"), skipped_topology("no GPU information: " + error)
    if not devices:
        return skipped_gpus("nvidia-smi lists no GPU", "nvidia-smi"), skipped_topology("no GPU")
    gpus = {"status": "ok", "reason": NO_COMPUTE_CAP if legacy else None, "source": "nvidia-smi",
            "nvidia_smi": binary,
            "driver_version": devices[0].get("driver_version"), "cuda_version": None,
            "count": len(devices), "devices": devices, "processes_error": None}
    gpus["cuda_version"] = _cuda_version(binary, timeout)
    attach_processes(binary, timeout, gpus)
    return gpus, _topology(binary, timeout, len(devices))


def query_gpus(binary, timeout):
    """(devices, error, legacy): the query with compute_cap, or without it when the driver refuses the field."""
    text, error = _smi(binary, [QUERY_GPU, CSV], timeout)
    legacy = error is not None and nvidia_smi.rejected_field(error) == "compute_cap"
    if legacy:
        text, error = _smi(binary, [LEGACY_QUERY_GPU, CSV], timeout)
    if error is None:
        fields = nvidia_smi.LEGACY_QUERY_GPU_FIELDS if legacy else nvidia_smi.QUERY_GPU_FIELDS
        try:
            return nvidia_smi.parse_query_gpu(text, fields), None, legacy
        except nvidia_smi.NvidiaSmiError as exc:
            error = str(exc)
    return None, error, legacy


def _cuda_version(binary, timeout):
    """`nvidia-smi --version` is cheap on recent drivers; older ones only print it in the table header."""
    for args in (["--version"], []):
        text, _ = _smi(binary, args, timeout)
        version = nvidia_smi.parse_cuda_version(text)
        if version:
            return version
    return None


def attach_processes(binary, timeout, gpus):
    """Each device gets `processes`: a list, or None when nvidia-smi could not say (never a false idle)."""
    text, error = _smi(binary, [QUERY_APPS, CSV], timeout)
    processes = None
    if error is None:
        try:
            processes = nvidia_smi.parse_compute_apps(text)
        except nvidia_smi.NvidiaSmiError as exc:
            error = str(exc)
    gpus["processes_error"] = error
    for device in gpus["devices"]:
        if processes is None:
            device["processes"] = None
            continue
        device["processes"] = [{"pid": p["pid"], "name": p["name"], "used_memory_mib": p["used_memory_mib"]}
                               for p in processes if p["gpu_uuid"] and p["gpu_uuid"] == device.get("uuid")]


def _topology(binary, timeout, count):
    text, error = _smi(binary, ["topo", "-m"], timeout)
    if error is None:
        try:
            topology = nvidia_smi.parse_topology(text)
        except nvidia_smi.NvidiaSmiError as exc:
            error = str(exc)
    if error is not None:
        return skipped_topology(error)
    if not topology["gpus"]:
        return skipped_topology(topology.get("reason") or "no GPU rows in `nvidia-smi topo -m`")
    topology["status"] = "ok"
    topology["reason"] = None
    if len(topology["gpus"]) != count:
        topology["reason"] = "topo -m shows %d GPUs, the query %d" % (len(topology["gpus"]), count)
    return topology


def gpus_from_torch():
    """Only when nvidia-smi is missing (a slim container): torch.cuda reads the devices, initialising CUDA."""
    reason = "nvidia-smi not found on PATH"
    try:
        import torch
    except Exception as exc:
        return skipped_gpus("%s; torch not importable (%s)" % (reason, exc)), skipped_topology(reason)
    try:
        if not torch.cuda.is_available():
            return skipped_gpus(reason + "; torch sees no CUDA device"), skipped_topology(reason)
        devices = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            uuid = getattr(props, "uuid", None)
            devices.append({
                "index": index, "name": props.name, "uuid": ("GPU-%s" % uuid) if uuid else None,
                "pci_bus_id": _torch_bus_id(props), "memory_total_mib": props.total_memory // (1024 * 1024),
                "memory_used_mib": None, "utilization_pct": None, "driver_version": None,
                "compute_cap": "%d.%d" % (props.major, props.minor),
                "compute_capability": "sm_%d%d" % (props.major, props.minor), "processes": None})
    except Exception as exc:
        return (skipped_gpus("%s; torch.cuda failed: %s: %s" % (reason, type(exc).__name__, exc)),
                skipped_topology(reason))
    gpus = {"status": "ok", "reason": reason + "; devices read through torch.cuda", "source": "torch",
            "driver_version": None, "cuda_version": getattr(torch.version, "cuda", None), "count": len(devices),
            "devices": devices, "processes_error": "nvidia-smi not found on PATH"}
    topology = skipped_topology(reason + "; no topology without it")
    if len(devices) == 1:
        topology = {"status": "ok", "reason": None, "gpus": ["GPU0"], "matrix": {"GPU0": {"GPU0": "X"}},
                    "summary": "single", "link_counts": {}, "affinity": {}, "nics": []}
    return gpus, topology


def gpus_from_torch_child(python, modules, timeout, run=None):
    """gpus_from_torch() in the run's torch child under `python`; its failure (missing, crashed, hung, no
    torch) is the reason."""
    from probes.hostinfo import torch_child  # lazily: only hosts without nvidia-smi need a child
    data, why = torch_child.ask(python, {} if run is None else run, "gpus", modules, max(timeout, 30.0))
    if data is None:
        reason = "nvidia-smi not found on PATH; torch.cuda under %s: %s" % (python, why)
        return skipped_gpus(reason), skipped_topology("nvidia-smi not found on PATH")
    data["gpus"]["reason"] = "%s (torch.cuda under %s)" % (data["gpus"].get("reason"), python)
    return data["gpus"], data["topology"]


def torch_gpus_job(args):
    """In the torch child: the GPU list and topology as gpus_from_torch() reads them."""
    return dict(zip(("gpus", "topology"), gpus_from_torch()))


def _torch_bus_id(props):
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return "%08X:%02X:%02X.0" % (getattr(props, "pci_domain_id", 0) or 0, bus, getattr(props, "pci_device_id", 0) or 0)
