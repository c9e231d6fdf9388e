"""Frames of the wrong schema or shape, through `gpudiag ingest`: one frame_error per host with a one-line
reason, never a traceback, and never read as ok data."""
import json

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.models import CommandResult, Host
from gpudiag.orchestrator import classify

GOOD_PROBE = {"status": "ok", "duration_s": 0.1, "data": {"x": 1}}


def frame(host, **changes):
    doc = dict({"schema": 1, "host": host, "python": {"executable": "/usr/bin/python3"},
                "probes": {"env": GOOD_PROBE}}, **changes)
    return f"GPUDIAG-BEGIN n-{host}\n{json.dumps(doc)}\nGPUDIAG-END n-{host}\n"


BAD_FRAMES = {
    "python-string": ({"python": "py"}, "'python' is 'py', not a JSON object"),
    "probes-list": ({"probes": [1]}, "'probes' is [1], not a JSON object"),
    "probe-not-object": ({"probes": {"env": 1}}, "probe env: 1 is not a JSON object"),
    "error-string": ({"probes": {"env": {"status": "error", "error": "boom"}}},
                     "probe env: 'error' is 'boom', not a JSON object"),
    "duration-text": ({"probes": {"env": {"status": "ok", "duration_s": "abc"}}},
                      "probe env: 'duration_s' is 'abc', not a number"),
    "schema-9": ({"schema": 9}, "schema 9 is newer than this gpudiag reads"),
    "no-schema": ({"schema": None}, "no integer 'schema' field"),
    "executable-number": ({"python": {"executable": 3}}, "'python.executable' is 3, not a string"),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_classify_turns_a_badly_shaped_frame_into_frame_error(name):
    changes, reason = BAD_FRAMES[name]
    text = frame(name, **changes).replace(f"n-{name}", "nonce")
    result = classify(Host(name=name), CommandResult(0, text.encode(), b"", 1.0), "nonce", 10.0)
    assert result.status == "frame_error"
    assert reason in result.reason and "\n" not in result.reason


def test_ingest_of_badly_shaped_frames_gives_one_status_per_host(tmp_path):
    text = "".join(frame(name, **changes) for name, (changes, _) in BAD_FRAMES.items())
    text += frame("fine")
    text += 'GPUDIAG-BEGIN n-cut\n{"schema": 1, "host": "cut\\q-1", "probes": {"env": {"sta\n'
    source = tmp_path / "collected.txt"
    source.write_text(text)
    result = CliRunner().invoke(cli, ["ingest", str(source), "--reports-dir", str(tmp_path / "r"), "--json"])
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception,
                                                                                        SystemExit)
    assert result.exit_code == 3, result.output
    hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}
    assert set(hosts) == set(BAD_FRAMES) | {"fine", "cut\\q-1"}
    assert hosts["fine"]["status"] == "ok"
    for name, (_, reason) in BAD_FRAMES.items():
        assert hosts[name]["status"] == "frame_error", name
        assert reason in hosts[name]["reason"] and "\n" not in hosts[name]["reason"]
    assert hosts["cut\\q-1"]["status"] == "frame_error"
