"""Each live server's interpreter and sglang, read once per interpreter, from real sglang wheels."""
import sys

import pytest

from probes.hostinfo import serving
from probes.sglang_facts import locate
from tests.sglang_wheels import SkipWheel, site_packages_for


def site(version):
    try:
        return str(site_packages_for(version))
    except SkipWheel as exc:
        pytest.skip(str(exc))


def server(pid, python, pythonpath, port, gpus):
    return {"pid": pid, "python": python, "python_exists": True, "same_root": True,
            "env": {"PYTHONPATH": pythonpath}, "cuda_visible_devices": gpus,
            "args": {"port": port, "tp_size": 1, "speculative_algorithm": "EAGLE"}}


def test_servers_sharing_an_interpreter_share_its_facts(monkeypatch, tmp_path):
    new, old = site("0.5.23"), site("0.5.11")
    calls = []
    real = locate.search_paths
    monkeypatch.setattr(locate, "search_paths", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    other = str(tmp_path / "other-python")   # the same binary under another name: another interpreter
    (tmp_path / "other-python").symlink_to(sys.executable)
    found = serving.interpreters([server(30, sys.executable, new, 30000, "0"),
                                  server(31, sys.executable, new, 30001, "1"),
                                  server(40, other, old, 31000, "2,3")])
    assert calls == [sys.executable, other]   # once per interpreter
    first, second = found
    assert first["path"] == sys.executable and [s["port"] for s in first["servers"]] == [30000, 30001]
    assert first["sglang"]["found"] is True and first["sglang"]["version"] == "0.5.23"
    assert first["sglang"]["version_from"] == "literal" and first["sglang"]["site_packages"] == new
    assert second["servers"] == [{"pid": 40, "port": 31000, "gpus": "2,3", "tp_size": 1,
                                  "speculative_algorithm": "EAGLE"}]
    assert second["sglang"]["version"] == "0.5.11"


def test_an_unreachable_or_sglang_less_interpreter_says_why(tmp_path):
    gone = dict(server(5, "/nowhere/python", None, 1, None), python_exists=False)
    bare = server(6, sys.executable, str(tmp_path), 2, None)
    bare["env"] = {}
    found = serving.interpreters([gone, bare], timeout=20)
    assert found[0]["sglang"]["found"] is None and "not reachable" in found[0]["sglang"]["reason"]
    assert found[1]["sglang"]["found"] in (True, False)   # whatever this machine's Python has, it is read
    if found[1]["sglang"]["found"] is False:
        assert "no sglang package" in found[1]["sglang"]["reason"]
