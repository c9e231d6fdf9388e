"""The probe runner: every outcome of a probe becomes data, and stray output cannot break the frame."""
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

from probes import runner
from probes.context import Skip, run_command


@pytest.fixture
def fake_probe(monkeypatch):
    """Register an in-memory module probes.<name> whose collect() is the given function."""
    def make(name, collect):
        module = types.ModuleType("probes." + name)
        module.collect = collect
        monkeypatch.setitem(sys.modules, "probes." + name, module)
        return name
    return make


def test_ok_probe_returns_its_data(fake_probe):
    name = fake_probe("fake_ok", lambda ctx: {"answer": 42, "opt": ctx.option("x")})
    result = runner.run_probe(name, {"x": "y"}, {}, timeout=5)
    assert result["status"] == "ok"
    assert result["data"] == {"answer": 42, "opt": "y"}


def test_raising_probe_becomes_an_error_with_type_message_and_frames(fake_probe):
    def collect(ctx):
        raise ValueError("bad nvidia-smi line")
    result = runner.run_probe(fake_probe("fake_err", collect), {}, {}, timeout=5)
    assert result["status"] == "error"
    assert result["error"]["type"] == "ValueError"
    assert result["error"]["message"] == "bad nvidia-smi line"
    assert any("collect" in line for line in result["error"]["traceback"])


def test_system_exit_inside_a_probe_is_caught(fake_probe):
    result = runner.run_probe(fake_probe("fake_exit", lambda ctx: sys.exit(3)), {}, {}, timeout=5)
    assert result["status"] == "error" and result["error"]["type"] == "SystemExit"


def test_skip_records_the_reason(fake_probe):
    def collect(ctx):
        raise Skip("torch is not importable")
    result = runner.run_probe(fake_probe("fake_skip", collect), {}, {}, timeout=5)
    assert result == {"status": "skipped", "duration_s": result["duration_s"], "reason": "torch is not importable"}


def test_hanging_probe_times_out_and_the_next_probe_still_runs(fake_probe):
    import threading
    release = threading.Event()
    fake_probe("fake_hang", lambda ctx: release.wait(30))
    fake_probe("fake_after", lambda ctx: "ran")
    hung = runner.run_probe("fake_hang", {}, {}, timeout=0.3)
    after = runner.run_probe("fake_after", {}, {}, timeout=5)
    release.set()
    assert hung["status"] == "timeout"
    assert "did not finish within" in hung["reason"]
    assert hung["duration_s"] < 5
    assert after == {"status": "ok", "duration_s": after["duration_s"], "data": "ran"}


def test_select_probes_keeps_canonical_order_and_reports_unknown():
    order, unknown = runner.select_probes(["sglang_source", "env", "bogus", "deployment"])
    assert order == ["deployment", "env", "sglang_source"]
    assert unknown == ["bogus"]


def test_stray_prints_go_to_stderr_not_into_the_frame(tmp_path):
    # A probe (or a C library) printing to stdout must not corrupt the document.
    script = textwrap.dedent("""
        import os, sys, types
        sys.path.insert(0, %r)
        import probes.runner as r
        m = types.ModuleType("probes.noisy")
        def collect(ctx):
            print("python-level noise")
            os.write(1, b"fd-level noise\\n")
            return {"quiet": True}
        m.collect = collect
        sys.modules["probes.noisy"] = m
        declared = {"probes.noisy": [False, "PROBE = {'set': 'deep'}"]}  # how a bundle declares a probe
        r.main({"nonce": "n0", "probes": ["noisy"], "modules": declared})
    """) % os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    out = proc.stdout.decode()
    assert "noise" not in out
    assert "python-level noise" in proc.stderr.decode() and "fd-level noise" in proc.stderr.decode()
    body = out.split("GPUDIAG-BEGIN n0\n", 1)[1].split("\nGPUDIAG-END n0", 1)[0]
    assert json.loads(body)["probes"]["noisy"]["data"] == {"quiet": True}


def test_run_command_never_raises():
    missing = run_command(["/nonexistent/nvidia-smi"], timeout=2)
    assert missing["ok"] is False and "not found" in missing["error"]
    slow = run_command([sys.executable, "-c", "import time; time.sleep(10)"], timeout=0.5)
    assert slow["ok"] is False and "no answer within" in slow["error"]
    failing = run_command([sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(4)"], timeout=10)
    assert failing["exit_code"] == 4 and "boom" in failing["error"]


def test_run_command_kills_the_whole_group_on_timeout(tmp_path):
    marker = tmp_path / "grandchild-alive"
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3); open(%r, 'w').write('x')"])
        time.sleep(30)
    """ % str(marker)))
    result = run_command([sys.executable, str(script)], timeout=0.5)
    assert "no answer within" in result["error"]
    import time
    time.sleep(3.5)
    assert not marker.exists()  # the grandchild died with its group


def test_frame_lines_wrap_without_cutting_after_a_space_and_join_back():
    text = json.dumps({"a": "x " * 50, "b": list(range(40))})
    lines = runner.frame_lines(text, 16)
    assert "".join(lines) == text
    assert all(not line.endswith(" ") for line in lines[:-1])
    assert max(len(line) for line in lines) <= 16 + text.count(" ")
    assert runner.frame_lines(text, 0) == [text]


def test_the_host_budget_cuts_a_slow_probe_and_skips_the_rest(fake_probe):
    import threading
    release = threading.Event()
    fake_probe("fake_slow", lambda ctx: release.wait(30))
    fake_probe("fake_late", lambda ctx: "never")
    # declared the way a bundle carries them: light probes run before deep ones
    declared = {"probes.fake_slow": [False, "PROBE = {'set': 'light'}"],
                "probes.fake_late": [False, "PROBE = {'set': 'deep'}"]}
    try:
        doc = runner.run_all({"probes": ["fake_slow", "fake_late"], "budget_s": 1.5, "modules": declared})
    finally:
        release.set()
    assert doc["probes"]["fake_slow"]["status"] == "timeout"
    assert doc["probes"]["fake_slow"]["duration_s"] < 5 and doc["probes"]["fake_slow"]["limit_s"] == 1.5
    assert doc["probes"]["fake_late"] == {"status": "skipped", "duration_s": 0.0, "limit_s": 0.0,
                                          "declared_s": runner.DEFAULT_PROBE_TIMEOUT,
                                          "reason": "the host's deadline left no time for this probe"}


def test_select_probes_brings_what_a_probe_reads_from():
    # A bundle run (`python3 gpudiag-probes.pyz --probes copy_bench`) gets the same expansion as a scan.
    assert runner.select_probes(["copy_bench"]) == (["deployment", "sglang_source", "copy_bench"], [])
