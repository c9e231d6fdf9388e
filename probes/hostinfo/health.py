"""The host health a GPU operator checks first, read-only and bounded, for the env probe: per GPU the ECC
counters, retired pages and remapped rows, clock event (throttle) reasons, PCIe link against its maximum,
persistence and MIG mode, fabric and NVLink state (`nvidia-smi -q`, `nvidia-smi nvlink -s`), and the Xid
lines of this boot's kernel log. Nothing is changed on the host; each command has the env probe's limit.
Judging the counters (degraded link, throttling, uncorrectable errors) is the control side's job.
"""
from probes import kernel_log
from probes.context import run_command
from probes.hostinfo import nvidia_smi, smi_health
from probes.schemas import anything, b, enum, i, lst, obj, s

DEVICE = obj({
    "bus_id": s(), "name": s().null(), "uuid": s().null(),
    "persistence_mode": s("Enabled | Disabled").null(), "mig_mode": s("Enabled | Disabled").null(),
    "utilization_pct": i().null(), "performance_state": s().null(),
    "pcie": obj({"gen_current": i().null(), "gen_max": i("what GPU and host allow together").null(),
                 "gen_device_max": i().null(), "gen_host_max": i().null(),
                 "width_current": i().null(), "width_max": i().null(), "replays": i().null()}),
    "clock_reasons": anything("reason → active (idle, sw_power_cap, hw_slowdown, hw_thermal_slowdown, "
                              "hw_power_brake_slowdown, sw_thermal_slowdown, ...); null when not printed").null(),
    "ecc_mode": s().null(),
    "ecc": obj({"volatile": anything("{corrected, uncorrected} since the last reset"),
                "aggregate": anything("{corrected, uncorrected} over the GPU's life")}),
    "retired_pages": anything("{single_bit, double_bit, pending} (pre-Ampere page retirement)"),
    "remapped_rows": anything("{correctable, uncorrectable, pending, failure}; null before Ampere").null(),
    "reset_required": b().null(), "fabric": anything("{state, status} (NVSwitch systems)"),
    "nvlink": anything("{links, active, inactive} from `nvidia-smi nvlink -s`; null when not listed").null(),
}, "one GPU's health counters; null wherever the driver prints N/A")
SHAPE = obj({
    "status": enum(("ok", "skipped")), "reason": s().null(), "source": s().null(),
    "driver_version": s().null(), "gpus": lst(DEVICE),
    "nvlink_error": s("why `nvidia-smi nvlink -s` gave nothing").null(),
    "xid": obj({"source": s("dmesg | journalctl -k").null(), "since": s("boot").null(),
                "events": lst(obj({"pci": s(), "xid": i(), "text": s(), "clock_s": anything().opt()})),
                "reasons": lst(s(), "why a kernel log could not be read")}),
}, "GPU health counters (`nvidia-smi -q`) and this boot's Xid lines")


def skipped_health(reason, xid=None):
    return {"status": "skipped", "reason": reason, "source": None, "driver_version": None, "gpus": [],
            "nvlink_error": None, "xid": xid or {"source": None, "since": None, "events": [], "reasons": []}}


def _smi(binary, args, timeout):
    result = run_command([binary] + list(args), timeout=timeout)
    if result["ok"]:
        return result["stdout"], None
    message = nvidia_smi.failure_message(result["stdout"]) or nvidia_smi.failure_message(result["stderr"])
    return None, message or result["error"] or "nvidia-smi failed"


def collect_health(binary, budget, why_not=None):
    """The `health` section; `binary` is a working nvidia-smi (None: the Xid lines only, `why_not` says why),
    `budget()` the seconds one command may take now."""
    xid = kernel_log.xid_events(min(kernel_log.COMMAND_TIMEOUT, budget()))
    if binary is None:
        return skipped_health("no counters: %s" % (why_not or "nvidia-smi not usable"), xid)
    text, error = _smi(binary, ["-q"], budget())
    if error is not None:
        return skipped_health("nvidia-smi -q: " + error, xid)
    parsed = smi_health.parse_health(text)
    if not parsed["gpus"]:
        return skipped_health("nvidia-smi -q lists no GPU", xid)
    health = {"status": "ok", "reason": None, "source": "nvidia-smi -q", "driver_version": parsed["driver_version"],
              "gpus": parsed["gpus"], "nvlink_error": None, "xid": xid}
    links, error = _smi(binary, ["nvlink", "-s"], budget())
    by_uuid = {g["uuid"]: g for g in smi_health.parse_nvlink_status(links)} if error is None else {}
    health["nvlink_error"] = error
    for gpu in health["gpus"]:
        found = by_uuid.get(gpu.get("uuid"))
        gpu["nvlink"] = {k: found[k] for k in ("links", "active", "inactive")} if found else None
    return health
