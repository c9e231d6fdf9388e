"""A probe child imports the sglang the serving interpreter would: one reachable only through PYTHONPATH
is the one the child finds, the same the repro's own check (sglang_facts.locate) names."""
import json
import os
import sys

from probes.child import close_streams, kill_group, spawn
from probes.sglang_facts import locate

ENTRY = '''import importlib.util, json, os, sys
def main(payload):
    spec = importlib.util.find_spec("sglang")
    sys.stdout.write(json.dumps({"origin": spec and spec.origin, "cwd": os.getcwd()}) + "\\n")
    return 0
'''


def test_a_child_sees_an_sglang_only_pythonpath_reaches(tmp_path):
    reachable = tmp_path / "pythonpath"
    (reachable / "sglang").mkdir(parents=True)
    (reachable / "sglang" / "__init__.py").write_text("__version__ = '0.5.23'\n")
    (reachable / "gpudiag_pythonpath_entry.py").write_text(ENTRY)
    env = dict(os.environ, PYTHONPATH=str(reachable))
    proc = spawn(sys.executable, "gpudiag_pythonpath_entry:main", None, env=env, close_stdin=True)
    try:
        proc.payload_writer.join(60)
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        kill_group(proc)
        close_streams(proc)
    assert proc.returncode == 0, err.decode()
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["origin"] == str(reachable / "sglang" / "__init__.py")
    assert seen["cwd"] == os.path.abspath(os.sep)   # started in /: no stray module of the caller's directory
    paths, error = locate.search_paths(sys.executable, env_pythonpath=str(reachable))
    found = locate.find_package(paths)
    assert error is None and found["package_dir"] == str(reachable / "sglang")
