"""The env probe's pure parsers, fed with recorded nvidia-smi and /proc outputs."""
import os

import pytest

from probes import env
from probes.hostinfo import system

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8", newline="") as handle:
        return handle.read()


def smi(name):
    return fixture("nvidia-smi", name)


def test_h200_query_gives_eight_sm90_devices():
    devices = env.parse_query_gpu(smi("h200x8-query-gpu.csv"))
    assert [d["index"] for d in devices] == list(range(8))
    first = devices[0]
    assert first["name"] == "NVIDIA H200"
    assert first["uuid"].startswith("GPU-") and len(first["uuid"]) == 40
    assert first["pci_bus_id"] == "00000000:18:00.0"
    assert first["memory_total_mib"] == 143771
    assert first["memory_used_mib"] == 130215
    assert first["driver_version"] == "570.124.06"
    assert {d["compute_capability"] for d in devices} == {"sm_90"}
    assert devices[7]["utilization_pct"] == 100


@pytest.mark.parametrize("cap, expected", [("9.0", "sm_90"), ("10.0", "sm_100"), ("10.3", "sm_103"),
                                           ("12.0", "sm_120"), ("8.6", "sm_86"), ("[N/A]", None), ("", None)])
def test_compute_capability_names(cap, expected):
    assert env.sm_name(cap) == expected


def test_b300_is_sm103():
    devices = env.parse_query_gpu(smi("b300x8-query-gpu.csv"))
    assert len(devices) == 8
    assert devices[3]["name"] == "NVIDIA B300 SXM6 AC"
    assert {d["compute_capability"] for d in devices} == {"sm_103"}
    assert devices[0]["memory_total_mib"] == 275040


def test_rtx_pro_6000_is_sm120():
    devices = env.parse_query_gpu(smi("rtxpro6000x8-query-gpu.csv"))
    assert devices[0]["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert {d["compute_capability"] for d in devices} == {"sm_120"}
    assert [d["memory_used_mib"] for d in devices][4:6] == [23855, 23855]


def test_odd_whitespace_and_placeholders():
    devices = env.parse_query_gpu(smi("odd-whitespace-na-query-gpu.csv"))
    assert len(devices) == 2
    assert devices[0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert devices[0]["memory_used_mib"] is None and devices[0]["utilization_pct"] is None
    assert devices[0]["compute_capability"] == "sm_80"
    assert devices[1]["pci_bus_id"] == "00000000:0F:00.0"
    assert devices[1]["utilization_pct"] is None          # [Not Supported]
    assert devices[1]["compute_capability"] is None       # [N/A]
    assert devices[1]["memory_used_mib"] == 4


@pytest.mark.parametrize("parse", [env.parse_query_gpu, env.parse_compute_apps, env.parse_topology])
def test_driver_failure_raises_with_the_message(parse):
    with pytest.raises(env.NvidiaSmiError, match="couldn't communicate with the NVIDIA driver"):
        parse(smi("driver-failed.txt"))


def test_no_devices_is_an_empty_list():
    assert env.parse_query_gpu(smi("no-devices.txt")) == []


def test_compute_apps_per_gpu():
    apps = env.parse_compute_apps(smi("h200x8-compute-apps.csv"))
    assert len(apps) == 8
    assert apps[2]["pid"] == 48213 and apps[2]["name"] == "sglang::scheduler_TP2"
    assert apps[2]["used_memory_mib"] == 129664
    uuids = [d["uuid"] for d in env.parse_query_gpu(smi("h200x8-query-gpu.csv"))]
    assert [a["gpu_uuid"] for a in apps] == uuids


def test_compute_apps_placeholders_and_commas_in_names():
    apps = env.parse_compute_apps(smi("odd-compute-apps.csv"))
    assert apps[0]["pid"] == 3121
    assert apps[0]["name"] is None and apps[0]["used_memory_mib"] is None
    assert apps[1]["name"] == "/opt/conda/envs/serve, v2/bin/python3"
    assert apps[1]["used_memory_mib"] == 1024


def test_empty_compute_apps():
    assert env.parse_compute_apps("") == []
    assert env.parse_compute_apps("\n") == []


def test_h200_topology_is_nvlink_and_ignores_nics():
    topo = env.parse_topology(smi("h200x8-topo.txt"))
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["summary"] == "nvlink"
    assert topo["matrix"]["GPU0"]["GPU0"] == "X"
    assert topo["matrix"]["GPU3"]["GPU6"] == "NV18"
    assert all(set(row) == set(topo["gpus"]) for row in topo["matrix"].values())
    assert topo["link_counts"] == {"NV18": 56}
    assert len(topo["nics"]) == 10
    assert topo["affinity"]["GPU5"] == {"cpu": "48-95,144-191", "numa": "1"}


def test_rtx_pro_topology_is_pcie_with_every_kind():
    topo = env.parse_topology(smi("rtxpro6000x8-topo.txt"))
    assert topo["summary"] == "pcie"
    assert topo["matrix"]["GPU0"]["GPU1"] == "PIX"
    assert topo["matrix"]["GPU2"]["GPU3"] == "PXB"
    assert topo["matrix"]["GPU0"]["GPU2"] == "NODE"
    assert topo["matrix"]["GPU0"]["GPU7"] == "SYS"
    assert "NIC0" not in topo["matrix"] and all("NIC0" not in row for row in topo["matrix"].values())
    assert sum(topo["link_counts"].values()) == 56


def test_mixed_topology_with_spaces_and_crlf():
    topo = env.parse_topology(smi("h200nvl-mixed-spaces-topo.txt"))
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["summary"] == "mixed"
    assert topo["matrix"]["GPU1"]["GPU2"] == "NV18" and topo["matrix"]["GPU1"]["GPU5"] == "SYS"
    assert topo["affinity"]["GPU6"]["cpu"] == "32-63"


def test_single_gpu_topology():
    topo = env.parse_topology(smi("single-gpu-topo.txt"))
    assert topo["gpus"] == ["GPU0"] and topo["summary"] == "single"


def test_unreadable_topology_is_unknown():
    assert env.parse_topology("garbage\nmore garbage\n")["summary"] == "unknown"
    partial = "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\t???\t X \n"
    assert env.parse_topology(partial)["summary"] == "unknown"


def test_cuda_version_from_version_and_header():
    assert env.parse_cuda_version(smi("h200x8-version.txt")) == "12.8"
    assert env.parse_cuda_version(smi("b300x8-header.txt")) == "13.0"
    assert env.parse_cuda_version("NVIDIA-SMI version  : 470.1\n") is None


def test_meminfo_and_os_release():
    meminfo = system.parse_meminfo(fixture("proc", "meminfo"))
    assert meminfo["MemTotal"] == 2113474 and meminfo["MemAvailable"] == 1987012
    release = system.parse_os_release('PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n')
    assert release == {"PRETTY_NAME": "Ubuntu 22.04.4 LTS", "ID": "ubuntu", "VERSION_ID": "22.04"}


def test_old_driver_rejects_compute_cap_and_legacy_rows_parse():
    from probes.hostinfo import nvidia_smi
    with open(os.path.join(FIXTURES, "nvidia-smi", "r470-compute-cap-rejected.txt")) as handle:
        refused = handle.read()
    assert nvidia_smi.rejected_field(refused) == "compute_cap"
    assert nvidia_smi.rejected_field("0, NVIDIA H200, GPU-1, 0:1, 1, 1, 0, 570, 9.0") is None
    with pytest.raises(nvidia_smi.NvidiaSmiError):
        nvidia_smi.parse_query_gpu(refused)
    with open(os.path.join(FIXTURES, "nvidia-smi", "r470-query-gpu-legacy.csv")) as handle:
        legacy = handle.read()
    with pytest.raises(nvidia_smi.NvidiaSmiError):  # 8 cells where 9 are expected
        nvidia_smi.parse_query_gpu(legacy)
    devices = nvidia_smi.parse_query_gpu(legacy, nvidia_smi.LEGACY_QUERY_GPU_FIELDS)
    assert [d["driver_version"] for d in devices] == ["470.199.02"] * 2
    assert devices[1]["memory_used_mib"] == 30211 and devices[1]["compute_capability"] is None
