"""sglang_source looks for sglang in the host's one interpreter choice (probes/hostinfo/interpreter.py), with
no fallback rule of its own."""
import sys

from probes import sglang_source
from probes.context import ProbeContext
from probes.hostinfo import interpreter


def ctx(tmp_path, options=None, results=None):
    base = {"deployment": {"proc_root": str(tmp_path)}}  # an empty process table: no live server
    return ProbeContext(options=dict(base, **(options or {})), results=results or {})


def _chosen(context):
    found = interpreter.target(context)
    return found["path"], found["why"]


def test_the_choice_is_deployments_when_it_ran(tmp_path):
    chosen = {"path": "/srv/venv/bin/python", "why": "live_server"}
    assert _chosen(ctx(tmp_path, results={"deployment": {"interpreter": chosen}})) == ("/srv/venv/bin/python",
                                                                                    "live_server")


def test_without_deployment_the_same_rule_decides(tmp_path):
    explicit = ctx(tmp_path, {"python": "/opt/serving/bin/python", "python_explicit": True})
    assert _chosen(explicit) == ("/opt/serving/bin/python", "explicit")
    assert _chosen(ctx(tmp_path)) == (sys.executable, "default")
    data = sglang_source.collect(explicit)                              # sglang_source asks the same choice
    assert data["interpreter"] == {"path": "/opt/serving/bin/python", "why": "explicit"}


def test_sglang_source_names_the_chosen_interpreter_when_it_cannot_be_asked(tmp_path):
    missing = str(tmp_path / "gone" / "python")
    data = sglang_source.collect(ctx(tmp_path, {"python": missing, "python_explicit": True}))
    assert data["found"] is False and data["interpreter"] == {"path": missing, "why": "explicit"}
    assert missing in data["reason"]
