"""GPU health counters and kernel-library versions, read by the env probe: the parsers fed with real recorded
`nvidia-smi -q` / `nvlink -s` outputs and kernel-log lines (tests/fixtures/nvidia-smi/SOURCES.md,
tests/fixtures/kernel_log/), and env.collect() end to end against a fake nvidia-smi and dmesg on PATH."""
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from probes import env, kernel_log
from probes.context import ProbeContext
from probes.hostinfo import kernel_libs, smi_health
from probes.schemas import check
from tests.probes.test_env_collect import install_fake_smi, on_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMI = FIXTURES / "nvidia-smi"


def smi(name):
    return (SMI / name).read_text()


def test_every_health_fixture_names_its_source():
    sources = (SMI / "SOURCES.md").read_text()
    for name in ("h100x8-q-hw-slowdown.txt", "h100x8-q-sw-thermal.txt", "a10-q-remapped-uncorrectable.txt",
                 "rtx4090x8-q-idle-gen1.txt", "titanv-q-560.txt", "a100x8-nvlink-status.txt"):
        assert re.search(r"\| %s \|.*\| https://github\.com/\S+ \|" % re.escape(name), sources), name


def test_h100_hw_slowdown_and_power_brake_on_every_gpu():
    health = smi_health.parse_health(smi("h100x8-q-hw-slowdown.txt"))
    assert health["driver_version"] == "535.161.08" and len(health["gpus"]) == 8
    first = health["gpus"][0]
    assert first["bus_id"] == "00000000:19:00.0" and first["name"] == "NVIDIA H100 80GB HBM3"
    assert first["pcie"] == {"gen_current": 5, "gen_max": 5, "gen_device_max": 5, "gen_host_max": 5,
                             "width_current": 16, "width_max": 16, "replays": 67}
    assert all(g["clock_reasons"]["hw_slowdown"] and g["clock_reasons"]["hw_power_brake_slowdown"]
               for g in health["gpus"])
    assert first["clock_reasons"]["hw_thermal_slowdown"] is False and first["clock_reasons"]["idle"] is False
    assert first["persistence_mode"] == "Enabled" and first["mig_mode"] == "Disabled"
    assert first["ecc"]["volatile"] == {"corrected": 0, "uncorrected": 0}
    assert first["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert first["fabric"] == {"state": "Completed", "status": "Success"}


def test_a10_remapped_rows_pending_after_uncorrectable_errors():
    gpu = smi_health.parse_health(smi("a10-q-remapped-uncorrectable.txt"))["gpus"][0]
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}
    assert gpu["ecc_mode"] == "Enabled" and gpu["mig_mode"] is None       # N/A on an A10


def test_old_layouts_are_unknown_not_zero():
    gpu = smi_health.parse_health(smi("titanv-q-560.txt"))["gpus"][0]
    assert gpu["ecc"]["volatile"] == {"corrected": None, "uncorrected": None}   # Single/Double Bit: N/A
    assert gpu["remapped_rows"] is None                                          # `Remapped Rows : N/A`
    assert gpu["pcie"]["gen_current"] == 1 and gpu["clock_reasons"]["idle"] is True


def test_nvlink_status_counts_links_per_gpu():
    gpus = smi_health.parse_nvlink_status(smi("a100x8-nvlink-status.txt"))
    assert len(gpus) == 8 and gpus[0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert {(g["links"], g["active"], g["inactive"]) for g in gpus} == {(12, 12, 0)}
    assert smi_health.parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: <inactive>\n") == [
        {"index": 0, "uuid": "GPU-1", "links": 1, "active": 0, "inactive": 1}]


def test_xid_lines_of_a_gsp_timeout():
    lines = (FIXTURES / "kernel_log" / "xid_119_gsp_timeout.log").read_text().splitlines()
    assert lines[0].startswith("# source: https://github.com/")
    events = kernel_log.parse_xids(lines)
    assert [(e["pci"], e["xid"]) for e in events] == [("0000:9b:00", 119)] * 5
    assert events[0]["text"].startswith("pid=2024380, name=nvidia-smi, Timeout after 6s")
    assert "clock_s" not in events[0]                     # dmesg -T stamps wall-clock time
    assert kernel_log.parse_xids(["[ 7063.247407] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper"]) == [
        {"pci": "0000:10:1c", "xid": 63, "text": "pid=1896, Row Remapper", "clock_s": 7063.247407}]


def _dist(site, folder, name, version, requires=()):
    path = site / folder
    path.mkdir(parents=True)
    headers = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    headers += ["Requires-Dist: %s" % r for r in requires]
    (path / "METADATA").write_text("\n".join(headers) + "\n\nRequires-Dist: not-a-header\n")


def test_kernel_libs_read_from_metadata_first_on_the_path(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    _dist(first, "sgl_kernel-0.3.9.post2.dist-info", "sgl-kernel", "0.3.9.post2")
    _dist(second, "sgl_kernel-0.2.0.dist-info", "sgl-kernel", "0.2.0")
    _dist(second, "flashinfer_python-0.3.1.dist-info", "flashinfer_python", "0.3.1")
    _dist(second, "sglang-0.5.2.dist-info", "sglang", "0.5.2", ["sgl-kernel==0.3.9.post2", "orjson"])
    _dist(second, "orjson-3.10.0.dist-info", "orjson", "3.10.0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(first), str(second)]))
    record = kernel_libs.collect_kernel_libs(sys.executable, 20)
    assert record["status"] == "ok"
    assert record["packages"]["sgl-kernel"]["version"] == "0.3.9.post2"       # the first on the path wins
    assert record["packages"]["flashinfer-python"]["version"] == "0.3.1"
    assert record["packages"]["orjson"]["version"] == "3.10.0"                # named by sglang's requirements
    assert record["sglang"]["version"] == "0.5.2"
    assert record["sglang"]["requires"] == ["sgl-kernel==0.3.9.post2", "orjson"]   # headers only


def test_a_missing_interpreter_is_a_reason():
    record = kernel_libs.collect_kernel_libs("/nonexistent/python3", 5)
    assert record["status"] == "skipped" and "/nonexistent/python3" in record["reason"]


def fake_host(folder, q_fixture):
    bin_dir = install_fake_smi(folder, """\
        F=%s
        case "$*" in
          *--query-gpu=*) cat "$F/h200x8-query-gpu.csv" ;;
          *--query-compute-apps=*) cat "$F/h200x8-compute-apps.csv" ;;
          "topo -m") cat "$F/h200x8-topo.txt" ;;
          --version) cat "$F/h200x8-version.txt" ;;
          -q) cat "$F/%s" ;;
          "nvlink -s") cat "$F/a100x8-nvlink-status.txt" ;;
          *) echo "unexpected: $*" >&2; exit 2 ;;
        esac
        """ % (SMI, q_fixture))
    dmesg = bin_dir / "dmesg"
    dmesg.write_text("#!/bin/sh\ngrep -v '^# ' %s\n" % (FIXTURES / "kernel_log" / "xid_119_gsp_timeout.log"))
    dmesg.chmod(0o755)
    return bin_dir


def test_env_collect_reports_health_and_kernel_libs(tmp_path, monkeypatch):
    on_path(monkeypatch, fake_host(tmp_path / "bin", "h100x8-q-hw-slowdown.txt"))
    data = env.collect(ProbeContext(options={"env": {"torch": "false"}}))
    assert check(env.SHAPE, data, "env") is None
    health = data["health"]
    assert health["status"] == "ok" and health["source"] == "nvidia-smi -q" and len(health["gpus"]) == 8
    assert health["gpus"][0]["clock_reasons"]["hw_slowdown"] is True
    assert health["gpus"][0]["nvlink"] is None            # the recorded nvlink output is another host's GPUs
    assert health["xid"]["source"] == "dmesg" and len(health["xid"]["events"]) == 5
    assert data["kernel_libs"]["status"] == "ok" and data["kernel_libs"]["interpreter"]


def test_a_failing_nvidia_smi_still_reads_the_xid_lines(tmp_path, monkeypatch):
    bin_dir = fake_host(tmp_path / "bin", "h100x8-q-hw-slowdown.txt")
    shutil.copy(SMI / "driver-failed.txt", tmp_path / "failed.txt")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\ncat %s\nexit 9\n" % (tmp_path / "failed.txt"))
    on_path(monkeypatch, bin_dir)
    data = env.collect(ProbeContext(options={"env": {"torch": "false"}}))
    assert data["health"]["status"] == "skipped" and "couldn't communicate" in data["health"]["reason"]
    assert [e["xid"] for e in data["health"]["xid"]["events"]] == [119] * 5


@pytest.mark.parametrize("text", ["", "garbage\n", "GPU 00000000:01:00.0\n    PCI\n        GPU Link Info : N/A\n"])
def test_odd_q_output_never_raises(text):
    parsed = smi_health.parse_health(text)
    assert isinstance(parsed["gpus"], list)
