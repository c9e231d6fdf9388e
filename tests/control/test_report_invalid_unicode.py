"""One invalid string from a host never breaks a report: lone surrogates (`\\ud800`, `\\udfff`, a pair's half),
raw surrogate escapes and other odd strings put into every leaf and key of a real frame, taken through
`gpudiag ingest` and every report format (console, markdown with its appendix, JSON), and through the SSH
transport's frame reader."""
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.bundle import extract_frame
from gpudiag.cli import cli

FRAMES = Path(__file__).resolve().parents[1] / "fixtures" / "engines" / "pdsh_fleet.txt"
NONCE = "bundle-0.1.0-3eed4882"
# Each is what json.loads makes of a JSON escape a host may send; all but the last two hold a lone surrogate.
BAD = ["\ud800", "x\udfffy", "\udc80\udcff", "\ud83d", "a\ude00", "\ud800\ud800\udc00", "\U0001f600", "\ufffe\uffff"]


def real_document() -> dict:
    line = next(text for text in FRAMES.read_text().splitlines() if text.startswith("h0: {"))
    return json.loads(line[4:])


def poisoned(seed: int) -> dict:
    """The real document with a bad string in its string leaves (but its statuses) and one key, at random."""
    rng = random.Random(seed)

    def walk(value):
        if isinstance(value, dict):
            return {key: item if key == "status" else walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, str):
            return value + rng.choice(BAD) if rng.random() < 0.7 else rng.choice(BAD)
        return value

    doc = walk(real_document())
    doc["host"] = doc["probes"]["env"]["data"]["hostname"] = "gpu\ud800"
    doc["probes"]["env"]["data"]["topology"]["link_counts"]["NV\udc80"] = 2
    return doc


def frame_text(docs: list[dict]) -> str:
    out = []
    for number, doc in enumerate(docs):
        out += [f"h{number}: GPUDIAG-BEGIN {NONCE}", f"h{number}: " + json.dumps(doc), f"h{number}: GPUDIAG-END {NONCE}"]
    return "\n".join(out) + "\n"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "200"})


def has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@pytest.mark.parametrize("seed", range(6))
def test_every_report_format_reads_a_fleet_whose_strings_hold_lone_surrogates(tmp_path, seed):
    source = tmp_path / "collected.txt"
    source.write_text(frame_text([poisoned(seed), poisoned(seed + 100), real_document()]), encoding="utf-8")
    reports = tmp_path / "reports"
    ingested = invoke("ingest", source, "--reports-dir", reports)
    assert ingested.exit_code in (0, 1, 3, 4), ingested.output
    stored = [json.dumps(json.loads(p.read_text(encoding="utf-8")), ensure_ascii=False) for p in reports.rglob("*.json")]
    assert stored and not any(has_lone_surrogate(text) for text in stored)
    assert any('"gpu\ufffd"' in text for text in stored)                  # replaced, and the mark shows
    for args in ([], ["--markdown"], ["--json"], ["-o", tmp_path / "out.md"], ["-o", tmp_path / "out.json"]):
        result = invoke("report", "--reports-dir", reports, *args)
        assert result.exit_code in (0, 1, 3, 4), (args, result.output[-2000:], result.exception)
        assert not has_lone_surrogate(result.output)
    assert (tmp_path / "out.appendix.md").stat().st_size > 1000            # the appendix is written, not left empty
    assert "\ufffd" in (tmp_path / "out.appendix.md").read_text(encoding="utf-8")
    json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))


def test_the_ssh_frame_reader_makes_host_strings_valid_unicode():
    doc = poisoned(7)
    stdout = frame_text([doc]).replace("h0: ", "").encode()
    read = extract_frame(stdout, NONCE)
    text = json.dumps(read, ensure_ascii=False)
    assert not has_lone_surrogate(text)
    assert read["host"] == "gpu\ufffd"
    text.encode("utf-8")                                                    # strict: would raise on a surrogate
