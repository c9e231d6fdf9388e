"""The sglang mode end to end with a stand-in interpreter: model dirs, launch, sweep, boundary, cleanup.

The stand-in answers `-m sglang.launch_server ...` like a server that crashes on concurrent requests
when draft tokens > 8, and checks the reduced config.json and draft config it is given.
"""
import os
import stat
import sys

import pytest

from probes import cuda_graph
from probes.context import ProbeContext
from probes.graphrepro import results
from tests.probes.test_cuda_graph_support import STANDIN_SERVER

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FAKE_SGLANG = r'''#!%(python)s
import json, os, sys
args = sys.argv[1:]
assert args[:2] == ["-m", "sglang.launch_server"], args
def value(flag):
    return args[args.index(flag) + 1]
with open(os.path.join(value("--model-path"), "config.json")) as fh:
    target = json.load(fh)
with open(os.path.join(value("--speculative-draft-model-path"), "config.json")) as fh:
    draft = json.load(fh)
print("target layers=%%d draft=%%s" %% (target["num_hidden_layers"], draft["architectures"][0]), flush=True)
assert target["num_hidden_layers"] == 2 and value("--load-format") == "dummy"
assert draft["dflash_config"]["block_size"] == int(value("--speculative-num-draft-tokens"))
# The seed's DFlash shape: the layer cut as an override (it reaches both configs), dummy weights for both.
assert json.loads(value("--json-model-override-args")) == {"num_hidden_layers": 2} == {
    "num_hidden_layers": draft["num_hidden_layers"]}
assert value("--speculative-draft-load-format") == "dummy"
assert value("--cuda-graph-max-bs") == "4" and value("--cuda-graph-bs") == "1"
mode = "crash_when_busy" if int(value("--speculative-num-draft-tokens")) > 8 else "ok"
sys.argv = ["standin", mode, value("--port")]
exec(compile(open(%(standin)r).read(), "standin", "exec"))
'''

FLAGS_0_5_11 = ["--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft-load-format",
                "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
                "--cuda-graph-max-bs", "--cuda-graph-bs"]


def test_sglang_sweep_finds_the_capture_boundary_and_leaves_nothing(tmp_path):
    standin = tmp_path / "standin.py"
    standin.write_text(STANDIN_SERVER)
    fake = tmp_path / "python-with-sglang"
    fake.write_text(FAKE_SGLANG % {"python": sys.executable, "standin": str(standin)})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    flags = [{"name": f, "file": "sglang/srt/server_args.py", "line": 1} for f in FLAGS_0_5_11]
    ctx = ProbeContext(results={"sglang_source": {"server_flags": flags, "version": "0.5.11"}})
    settings = cuda_graph.settings_from({"algorithms": ["DFLASH"], "batch_sizes": [1, 4], "draft_tokens": [6, 10]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, dict(os.environ), "compute capability sm_90", str(fake))
    results.summarise(data, "sm_90")
    by_cell = {(c["batch_size"], c["draft_tokens"]): c for c in data["cells"]}
    assert sorted({dt for _, dt in by_cell}) == [6, 8, 9, 10]   # one launch per draft-token value, bisected
    assert by_cell[(1, 10)]["status"] == "ok" and by_cell[(4, 8)]["status"] == "ok"
    failing = by_cell[(4, 9)]
    assert failing["status"] == "crashed_on_request" and "server died" in failing["detail"]
    assert failing["signature"]["name"] == "illegal_memory_access"   # the crash-log classifier's
    assert failing["family"] == "device_fault" and failing["advice_assumes"] == "sglang 0.5.11 (before 0.5.14)"
    assert any("illegal memory access" in line for line in failing["log_excerpt"])
    assert failing["omitted_flags"] == [] and "--speculative-draft-load-format" in failing["command"]
    assert failing["config_sources"]["target"] == "bundled Llama-3-8B-shaped config"
    assert data["boundary"]["text"] == ("DFLASH crashes when draft tokens > 8 at bs >= 4 on sm_90; "
                                        "graphs are safe up to 8")
    assert data["signatures"][0]["name"] == "illegal_memory_access" and data["advice"]
    assert processes_running(str(fake)) == []


def processes_running(needle):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                if needle.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


REJECTING_SGLANG = r'''#!%(python)s
import sys
args = sys.argv[1:]
with open(%(record)r, "a") as fh:
    fh.write(args[args.index("--speculative-algorithm") + 1] + "\n")
sys.stderr.write("launch_server: error: argument --speculative-algorithm: invalid choice\n")
sys.exit(2)
'''


@pytest.mark.parametrize("version", ["0.4.10", "0.5.5"])
def test_algorithms_the_release_lacks_are_skipped_never_launched(tmp_path, version):
    """0.4.10 (enum) and 0.5.5 (registered by helper calls) have EAGLE and EAGLE3 but no DFLASH: with
    --algorithm all, EAGLE and EAGLE3 launch and DFLASH must not look like a failure."""
    from probes.sglang_facts.flags import find_server_flags
    from probes.sglang_facts.speculative import find_algorithms
    from probes.sglang_facts.sources import SourceTree
    from tests.sglang_wheels import require
    tree = SourceTree(str(require(version)))
    source = {"version": version, "speculative_algorithms": [a["name"] for a in find_algorithms(tree)],
              "server_flags": find_server_flags(tree)["server_flags"]}
    record = tmp_path / "launched.txt"
    fake = tmp_path / "python-with-old-sglang"
    fake.write_text(REJECTING_SGLANG % {"python": sys.executable, "record": str(record)})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ctx = ProbeContext(results={"sglang_source": source})
    settings = cuda_graph.settings_from({"batch_sizes": [1, 4], "draft_tokens": [2, 3]})
    assert settings["algorithms"] == ["EAGLE", "EAGLE3", "DFLASH"]
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, dict(os.environ), "", str(fake))
    results.summarise(data, "sm_90")
    assert set(record.read_text().split()) == {"EAGLE", "EAGLE3"}
    dflash = [c for c in data["cells"] if c["algorithm"] == "DFLASH"]
    assert [c["batch_size"] for c in dflash] == [1, 4]
    assert all(c["status"] == "skipped" and c["detail"] == "sglang %s has no DFLASH" % version for c in dflash)
    assert not [b for b in data["boundaries"] if b["label"] == "DFLASH"]
    assert any(n.startswith("DFLASH not launched: sglang %s has no DFLASH" % version) for n in data["notes"])
    # Without the release's list every algorithm is still tried, and the note says why.
    data = {"cells": [], "boundaries": [], "notes": []}
    only_dflash = cuda_graph.settings_from({"algorithms": ["DFLASH"], "batch_sizes": [1], "draft_tokens": [2, 2]})
    cuda_graph.run_sglang(ProbeContext(results={}), only_dflash, data, dict(os.environ), "", str(fake))
    assert record.read_text().split()[-1] == "DFLASH" and data["cells"][0]["status"] == "error"
    assert any("speculative algorithms unknown" in n for n in data["notes"])


MISSING_DEP_SGLANG = r'''#!%(python)s
import sys
args = sys.argv[1:]
if args[:1] == ["-c"]:   # the import check before any launch
    if %(at_import)r:
        sys.stderr.write("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
                         "ModuleNotFoundError: No module named 'uvloop'\n")
        sys.exit(1)
    sys.exit(0)
with open(%(record)r, "a") as fh:
    fh.write("launched\n")
# The entry module imported, but the scheduler child needs a module the venv lacks.
print("Traceback (most recent call last):", flush=True)
print("ModuleNotFoundError: No module named 'sgl_kernel'", flush=True)
sys.exit(1)
'''


def run_with_fake(tmp_path, at_import):
    from probes.graphrepro import launch_plan
    launch_plan._import_checks.clear()
    record = tmp_path / "launched.txt"
    fake = tmp_path / ("python-missing-%s" % ("import" if at_import else "child"))
    fake.write_text(MISSING_DEP_SGLANG % {"python": sys.executable, "record": str(record), "at_import": at_import})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ctx = ProbeContext(results={"sglang_source": {"version": "0.5.11", "speculative_algorithms": ["EAGLE"]}})
    settings = cuda_graph.settings_from({"algorithms": ["EAGLE"], "batch_sizes": [1, 4], "draft_tokens": [2, 4]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, settings, data, dict(os.environ), "", str(fake))
    return data, fake, record


def test_a_module_missing_from_the_serving_venv_is_the_skip_reason_and_nothing_launches(tmp_path):
    data, fake, record = run_with_fake(tmp_path, at_import=True)
    assert not record.exists()
    assert data["cells"] and {c["status"] for c in data["cells"]} == {"skipped"}
    assert {c["detail"] for c in data["cells"]} == {
        "sglang cannot start under %s: module 'uvloop' is not installed there "
        "(a runtime dependency of sglang.launch_server)" % fake}


def test_a_module_missing_in_a_server_child_is_the_skip_reason_not_a_crash(tmp_path):
    data, fake, record = run_with_fake(tmp_path, at_import=False)
    assert record.read_text().count("launched") >= 1
    assert {c["status"] for c in data["cells"]} == {"skipped"}
    assert all("module 'sgl_kernel' is not installed there" in c["detail"] for c in data["cells"])


def test_real_wheel_in_a_venv_without_its_dependencies_names_the_missing_module(tmp_path):
    """sglang 0.5.5 from PyPI on a venv's path, none of its runtime dependencies installed."""
    import subprocess
    from probes.graphrepro import launch_plan
    from tests.sglang_wheels import require
    site = require("0.5.5")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "sglang.pth"), "w") as handle:
        handle.write(str(site) + "\n")
    launch_plan._import_checks.clear()
    env = dict((k, v) for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME"))
    reason = launch_plan.missing_dependency(python, env, timeout=120)
    assert reason is not None and reason.startswith("sglang cannot start under %s: module '" % python)
    module = reason.split("'")[1]
    assert module and not module.startswith("sglang")   # a dependency, not sglang itself
    probe = subprocess.run([python, "-c", "import %s" % module], capture_output=True, text=True, timeout=60, env=env)
    assert probe.returncode != 0 and "No module named" in probe.stderr
