"""A frame is refused by what its values would cost once built, not only by how many there are: through
`gpudiag ingest`, a host whose frame holds 300,000 empty objects (0.9 MB, under the value limit, ~21 MiB once
built) is a frame_error naming the limit, and its neighbour is read."""
import json

from click.testing import CliRunner

from gpudiag.cli import cli


def frame(host, **extra):
    doc = dict({"schema": 1, "host": host, "python": {"executable": "/usr/bin/python3"},
                "probes": {"env": {"status": "ok", "duration_s": 0.1, "data": {"x": 1}}}}, **extra)
    return f"GPUDIAG-BEGIN n-{host}\n{json.dumps(doc)}\nGPUDIAG-END n-{host}\n"


def test_a_dense_frame_under_the_value_limit_is_a_frame_error_naming_the_cost(tmp_path):
    dense = frame("dense").replace('{"schema": 1,', '{"schema": 1, "dense": [' + ",".join(["{}"] * 300_000) + "],")
    source = tmp_path / "collected.txt"
    source.write_text(frame("fine") + dense)
    result = CliRunner().invoke(cli, ["ingest", str(source), "--reports-dir", str(tmp_path / "r"), "--json"])
    assert result.exit_code == 3, result.output
    hosts = {h["name"]: h for h in json.loads(result.stdout)["hosts"]}
    assert hosts["fine"]["status"] == "ok"
    assert hosts["dense"]["status"] == "frame_error"
    assert "would take more than 8 MiB once decoded (the limit: 2.0x the document's size" in hosts["dense"]["reason"]
