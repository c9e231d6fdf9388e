"""env.collect() end to end against fake `nvidia-smi` executables on PATH: working, failing, hung, missing."""
import os
import stat
import sys
import textwrap
import time

import pytest

from probes import env
from probes.context import ProbeContext

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia-smi")


def install_fake_smi(folder, body):
    folder.mkdir(exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def on_path(monkeypatch, folder):
    monkeypatch.setenv("PATH", str(folder) + os.pathsep + "/usr/bin:/bin")


def h200_smi(folder):
    return install_fake_smi(folder, """\
        F=%s
        case "$*" in
          *--query-gpu=*) cat "$F/h200x8-query-gpu.csv" ;;
          *--query-compute-apps=*) cat "$F/h200x8-compute-apps.csv" ;;
          "topo -m") cat "$F/h200x8-topo.txt" ;;
          --version) cat "$F/h200x8-version.txt" ;;
          *) echo "unexpected: $*" >&2; exit 2 ;;
        esac
        """ % FIXTURES)


@pytest.fixture
def no_cuda_init(monkeypatch):
    """Fail loudly if anything asks torch.cuda about devices (that would initialise CUDA)."""
    import torch

    def forbidden(*args, **kwargs):
        raise AssertionError("torch.cuda was queried although nvidia-smi works")

    for name in ("is_available", "device_count", "get_device_properties", "init", "_lazy_init"):
        monkeypatch.setattr(torch.cuda, name, forbidden)


def test_working_smi_fills_gpus_processes_and_topology(tmp_path, monkeypatch, no_cuda_init):
    on_path(monkeypatch, h200_smi(tmp_path / "bin"))
    data = env.collect(ProbeContext())
    gpus, topo = data["gpus"], data["topology"]
    assert gpus["status"] == "ok" and gpus["source"] == "nvidia-smi"
    assert gpus["driver_version"] == "570.124.06" and gpus["cuda_version"] == "12.8"
    assert len(gpus["devices"]) == 8
    assert gpus["devices"][1]["processes"] == [{"pid": 48212, "name": "sglang::scheduler_TP1",
                                                "used_memory_mib": 129664}]
    assert topo["status"] == "ok" and topo["summary"] == "nvlink"
    assert data["torch"]["available"] is True and data["torch"]["version"].startswith("2.")


def test_driver_failure_skips_gpus_but_probe_is_ok(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_smi(tmp_path / "bin", """\
        cat %s/driver-failed.txt
        exit 9
        """ % FIXTURES))
    data = env.collect(ProbeContext())
    assert data["gpus"]["status"] == "skipped"
    assert "couldn't communicate with the NVIDIA driver" in data["gpus"]["reason"]
    assert data["topology"]["status"] == "skipped"
    assert data["memory_total_mib"] > 0 and data["hostname"]


def test_hung_smi_times_out_quickly(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_smi(tmp_path / "bin", "exec sleep 30\n"))
    started = time.monotonic()
    data = env.collect(ProbeContext(options={"env": {"command_timeout": 0.5}}))
    elapsed = time.monotonic() - started
    assert data["gpus"]["status"] == "skipped"
    assert "no answer within" in data["gpus"]["reason"]
    assert data["topology"]["status"] == "skipped"
    assert elapsed < 10, "one hung call must stop the other nvidia-smi calls"


def test_missing_smi_falls_back_to_torch_which_sees_no_gpu(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    on_path(monkeypatch, tmp_path / "empty")
    data = env.collect(ProbeContext())
    assert data["gpus"]["status"] == "skipped"
    assert "nvidia-smi not found" in data["gpus"]["reason"]
    import torch
    if not torch.cuda.is_available():
        assert "torch sees no CUDA device" in data["gpus"]["reason"]
    assert data["topology"]["status"] == "skipped"


def test_missing_smi_without_torch(tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    on_path(monkeypatch, tmp_path / "empty")
    data = env.collect(ProbeContext(options={"env": {"torch": False}}))
    assert data["gpus"]["status"] == "skipped" and data["gpus"]["reason"] == "nvidia-smi not found on PATH"
    assert data["gpus"]["devices"] == [] and data["topology"]["summary"] == "unknown"
    assert data["torch"]["available"] is None


def test_torch_missing_is_data_not_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    facts = env.torch_facts()
    assert facts["available"] is False
    assert facts["reason"].startswith("torch is not importable")


def test_python_and_host_facts():
    data = env.collect(ProbeContext(options={"env": {"torch": False, "command_timeout": 2}}))
    assert data["python"]["executable"] == sys.executable
    assert data["python"]["version"].count(".") == 2
    assert isinstance(data["python"]["venv"], bool)
    assert data["cpu_count"] == os.cpu_count()
    assert data["kernel"] and data["os"]


def _python39():
    import glob
    import subprocess
    candidates = glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")) + ["/usr/bin/python3.9"]
    for candidate in candidates:
        if os.access(candidate, os.X_OK) and subprocess.run([candidate, "-c", "pass"]).returncode == 0:
            return candidate
    return None


def test_probes_run_on_python39(tmp_path):
    """Hosts may run Python 3.9: the three probes must import and collect there (stdlib only)."""
    import json
    import subprocess
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 interpreter on this machine")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import json, sys; sys.path.insert(0, %r)\n"
            "from probes.context import ProbeContext, Skip\n"
            "from probes import env, deployment, torch_caps\n"
            "ctx = lambda: ProbeContext(options={'deployment': {'proc_root': %r}})\n"
            "out = {'env': env.collect(ctx()), 'deployment': deployment.collect(ctx())}\n"
            "try:\n    out['torch_caps'] = torch_caps.collect(ctx())\n"
            "except Skip as exc:\n    out['torch_caps'] = 'skip: %%s' %% exc\n"
            "print(json.dumps(out))\n") % (root, str(tmp_path))  # an empty /proc: no server to follow
    proc = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["env"]["python"]["version"].startswith("3.9.")
    assert out["deployment"]["interpreter"]["why"] == "default"
    assert isinstance(out["torch_caps"], (dict, str))


def test_no_devices_exit_code_is_skipped_with_that_reason(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_smi(tmp_path / "bin", """\
        echo "No devices were found"
        exit 6
        """))
    data = env.collect(ProbeContext(options={"env": {"torch": False}}))
    assert data["gpus"]["status"] == "skipped" and data["gpus"]["reason"] == "nvidia-smi lists no GPU"


def test_old_driver_without_compute_cap_field_still_lists_its_gpus(tmp_path, monkeypatch, no_cuda_init):
    """Drivers before R510 reject the compute_cap field and answer nothing: ask again without it."""
    on_path(monkeypatch, install_fake_smi(tmp_path / "bin", """\
        F=%s
        case "$*" in
          *--query-gpu=*compute_cap*) cat "$F/r470-compute-cap-rejected.txt"; exit 2 ;;
          *--query-gpu=*) cat "$F/r470-query-gpu-legacy.csv" ;;
          *--query-compute-apps=*) echo "GPU-8e2d44b0-51a3-6c0f-9b7e-1d2c3b4a5f66, 7, python3, 30000" ;;
          "topo -m") cat "$F/single-gpu-topo.txt" ;;
          *) echo "CUDA Version : 11.4" ;;
        esac
        """ % FIXTURES))
    gpus = env.collect(ProbeContext())["gpus"]
    assert gpus["status"] == "ok" and gpus["count"] == 2 and gpus["driver_version"] == "470.199.02"
    assert "compute_cap" in gpus["reason"]
    first, second = gpus["devices"]
    assert first["name"] == "Tesla V100-SXM2-32GB" and first["memory_total_mib"] == 32510
    assert first["compute_cap"] is None and first["compute_capability"] is None
    assert second["utilization_pct"] == 87 and second["processes"][0]["pid"] == 7
