"""Host-health findings from real recorded `nvidia-smi -q` outputs, Xid lines and real sglang wheels' METADATA,
and a light scan of localhost through the CLI with a fake nvidia-smi and dmesg that print the recordings."""
import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.findings import health, kernel_libs
from gpudiag.findings.requirements import parse_requirement, satisfies
from gpudiag.models import HostResult, ProbeResult
from probes import kernel_log
from probes.hostinfo import smi_health
from tests.sglang_wheels import SkipWheel, site_packages_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def host(health_data=None, kernel_libs=None, name="h1"):
    data = {"health": health_data or {}, "kernel_libs": kernel_libs or {}}
    return HostResult(name=name, status="ok", probes={"env": ProbeResult(status="ok", data=data)})


def recorded(name, xid_events=()):
    parsed = smi_health.parse_health((FIXTURES / "nvidia-smi" / name).read_text())
    return dict(parsed, status="ok", xid={"source": "dmesg", "events": list(xid_events)})


def ids(findings):
    return [(f.id, f.severity) for f in findings]


def test_hw_slowdown_on_eight_h100s_is_a_warning_naming_each_gpu():
    found = health.throttling([host(recorded("h100x8-q-hw-slowdown.txt"))])
    assert ids(found) == [("health.throttling", "warning")]
    rows = found[0].evidence[0].table
    assert len(rows) == 9 and rows[1][1] == "hw_slowdown, hw_power_brake_slowdown"


def test_sw_thermal_slowdown_is_found_on_the_one_gpu_that_has_it():
    found = health.throttling([host(recorded("h100x8-q-sw-thermal.txt"))])
    assert ids(found) == [("health.throttling", "warning")]
    assert any("sw_thermal_slowdown" in row[1] for row in found[0].evidence[0].table[1:])


def test_idle_gpus_at_a_lower_generation_are_not_degraded():
    assert health.pcie_degraded([host(recorded("rtx4090x8-q-idle-gen1.txt"))]) == []
    assert health.throttling([host(recorded("rtx4090x8-q-idle-gen1.txt"))]) == []   # Idle is no throttle


def test_a_narrow_or_slow_busy_link_is_degraded():
    gpu = smi_health.parse_health((FIXTURES / "nvidia-smi" / "h100x8-q-hw-slowdown.txt").read_text())["gpus"][0]
    gpu["pcie"].update(gen_current=3, width_current=8)
    found = health.pcie_degraded([host({"gpus": [gpu]})])
    assert ids(found) == [("health.pcie_degraded", "warning")]
    assert found[0].evidence[0].table[1][1:3] == ("Gen3 x8", "Gen5 x16")


def test_remapped_rows_pending_after_uncorrectable_errors():
    found = health.memory_errors([host(recorded("a10-q-remapped-uncorrectable.txt"))])
    assert ids(found) == [("health.ecc_uncorrectable", "warning")]
    counters = [row[1] for row in found[0].evidence[0].table[1:]]
    assert counters == ["remapped rows (uncorrectable)", "row remapping pending (needs a reset)"]
    assert health.memory_errors([host(recorded("h100x8-q-hw-slowdown.txt"))]) == []   # clean counters


def test_volatile_uncorrected_errors_are_an_error():
    gpu = {"bus_id": "00000000:19:00.0", "ecc": {"volatile": {"uncorrected": 2}, "aggregate": {"uncorrected": 2}}}
    assert ids(health.memory_errors([host({"gpus": [gpu]})])) == [("health.ecc_uncorrectable", "error")]


def test_unknown_counters_are_never_judged():
    assert health.memory_errors([host(recorded("titanv-q-560.txt"))]) == []
    odd = {"gpus": [{"pcie": "x", "clock_reasons": [1], "ecc": None, "remapped_rows": "N/A"}, 7]}
    for rule in (health.pcie_degraded, health.throttling, health.memory_errors, health.xid_since_boot):
        assert rule([host(odd)]) == []


def test_xid_119_since_boot_is_an_error():
    lines = (FIXTURES / "kernel_log" / "xid_119_gsp_timeout.log").read_text().splitlines()
    found = health.xid_since_boot([host(recorded("h100x8-q-hw-slowdown.txt", kernel_log.parse_xids(lines)))])
    assert ids(found) == [("health.xid", "error")]
    assert found[0].evidence[0].table[1][:4] == ("0000:9b:00", "119", "GSP RPC timeout", "5")


@pytest.mark.parametrize("version, spec, expected", [
    ("0.3.9.post2", "==0.3.9.post2", True), ("0.3.9", "==0.3.9.post2", False), ("2.8.0+cu128", "==2.8.0", True),
    ("12.9.0", ">=13.0", False), ("0.2.9rc2", "==0.2.9rc2", True), ("0.2.9", ">=0.2.9rc2", True),
    ("2.4.1", "~=2.4", True), ("3.0", "~=2.4", False), ("0.5.3", "==0.5.*", True), ("1.0", "", True)])
def test_pep440_subset(version, spec, expected):
    assert satisfies(version, spec) is expected


def wheel_requires(version):
    try:
        site = site_packages_for(version)
    except SkipWheel as exc:
        pytest.skip(str(exc))
    metadata = next(site.glob("sglang-*.dist-info")) / "METADATA"
    return [line.split(":", 1)[1].strip() for line in metadata.read_text().splitlines()
            if line.startswith("Requires-Dist:")]


def test_real_0_5_23_wheel_pins_sglang_kernel_and_flashinfer():
    requires = wheel_requires("0.5.23")
    assert any(parse_requirement(r).name == "sglang-kernel" for r in requires)
    libs = {"packages": {"sglang-kernel": {"version": "0.4.9"}, "flashinfer-python": {"version": "0.7.2"},
                         "cuda-python": {"version": "13.0.1"}, "sgl-deep-gemm": {"version": "0.2.3.post2"}},
            "sglang": {"version": "0.5.23", "dist_info": "/site/sglang-0.5.23.dist-info", "requires": requires},
            "interpreter": "/venv/bin/python"}
    found = kernel_libs.kernel_libs_mismatch([host(kernel_libs=libs)])
    assert ids(found) == [("health.kernel_libs_mismatch", "warning")]
    assert found[0].evidence[0].table[1:] == (("sglang-kernel", "==0.4.10", "0.4.9"),)
    libs["packages"]["sglang-kernel"]["version"] = "0.4.10"
    assert kernel_libs.kernel_libs_mismatch([host(kernel_libs=libs)]) == []


def test_real_0_4_10_wheel_extras_bind_only_installed_libraries():
    requires = wheel_requires("0.4.10")
    libs = {"packages": {"sgl-kernel": {"version": "0.2.8"}},
            "sglang": {"version": "0.4.10", "dist_info": "/s/sglang-0.4.10.dist-info", "requires": requires}}
    assert kernel_libs.kernel_libs_mismatch([host(kernel_libs=libs)]) == []      # flashinfer is an extra's, absent
    libs["packages"]["flashinfer-python"] = {"version": "0.2.8"}
    assert [row[0] for row in kernel_libs.kernel_libs_mismatch([host(kernel_libs=libs)])[0].evidence[0].table[1:]] == [
        "flashinfer-python"]


def test_light_scan_reports_health_findings_through_the_cli(tmp_path, monkeypatch):
    from tests.probes.test_health_probe import fake_host

    bin_dir = fake_host(tmp_path / "bin", "h100x8-q-hw-slowdown.txt")
    site = tmp_path / "site"
    for folder, name, version, requires in (
            ("sglang-0.5.2.dist-info", "sglang", "0.5.2", ["sgl-kernel==0.3.9.post2"]),
            ("sgl_kernel-0.3.8.dist-info", "sgl-kernel", "0.3.8", [])):
        (site / folder).mkdir(parents=True)
        (site / folder / "METADATA").write_text("Name: %s\nVersion: %s\n%s\n" % (
            name, version, "".join("Requires-Dist: %s\n" % r for r in requires)))
    monkeypatch.chdir(tmp_path)
    env = {"PATH": str(bin_dir) + os.pathsep + "/usr/bin:/bin", "PYTHONPATH": str(site)}
    reports = tmp_path / "reports"
    scan = CliRunner().invoke(cli, ["scan", "localhost", "--python", sys.executable, "--reports-dir", str(reports),
                                    "--probes", "env", "--set", "env.torch=false"], env=env)
    assert scan.exit_code in (0, 1), scan.output
    stored = json.loads(next((reports / "runs").glob("*/hosts/localhost.json")).read_text())
    data = stored["probes"]["env"]["data"]
    assert len(data["health"]["gpus"]) == 8 and data["kernel_libs"]["packages"]["sgl-kernel"]["version"] == "0.3.8"
    report = CliRunner().invoke(cli, ["report", "--reports-dir", str(reports), "--json"], env=env)
    found = {f["id"]: f for f in json.loads(report.stdout)["findings"]}
    assert found["health.throttling"]["severity"] == "warning"
    assert found["health.xid"]["severity"] == "error"
    assert found["health.kernel_libs_mismatch"]["evidence"][0]["table"][1] == ["sgl-kernel", "==0.3.9.post2", "0.3.8"]


def test_inactive_nvlink_links_and_an_unfinished_fabric():
    gpus = recorded("h100x8-q-hw-slowdown.txt")["gpus"]
    assert health.links_down([host({"gpus": gpus})]) == []          # fabric Completed/Success on all eight
    gpus[0]["nvlink"] = {"links": 18, "active": 16, "inactive": 2}
    gpus[1]["fabric"] = {"state": "In Progress", "status": None}
    gpus[2]["nvlink"] = {"links": 18, "active": 0, "inactive": 18}   # NVLink unused on this board: no finding
    found = health.links_down([host({"gpus": gpus})])
    assert ids(found) == [("health.links_down", "warning")]
    assert [row[1] for row in found[0].evidence[0].table[1:]] == [
        "2 of 18 NVLink links inactive", "fabric state In Progress, status ?"]
