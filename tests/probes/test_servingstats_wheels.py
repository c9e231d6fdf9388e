"""Decode and prefill lines built from each sglang release's own format strings (read from the real
wheels, tests/probes/sglang_log_formats.py) are read back right by the probe-side parser, behind the
release's logging prefix with every rank tag it can print."""
import pytest

from probes.servingstats.figures import figures
from probes.servingstats.lines import parse_line
from tests.probes.sglang_log_formats import FORWARD_CT, VALUES, logging_prefix, rendered_lines
from tests.sglang_wheels import SkipWheel, site_packages_for

RELEASES = ("0.4.3", "0.4.6", "0.4.7", "0.4.10", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.9", "0.5.11",
            "0.5.14", "0.5.23")


def package(version):
    try:
        return site_packages_for(version) / "sglang"
    except SkipWheel as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("version", RELEASES)
def test_every_decode_line_a_release_can_print_is_read_back(version):
    pkg = package(version)
    lines = rendered_lines(pkg, "Decode batch")
    assert lines, "no Decode batch format found in sglang %s" % version
    prefix = "[2026-01-02 03:04:05 %s] " % logging_prefix(pkg)
    for text in lines:
        record = parse_line(prefix + text)
        assert record is not None and record["kind"] == "decode", text
        assert record["running_req"] == VALUES["#running-req"], text
        assert record["gen_throughput"] == VALUES["gen throughput (token/s)"], text
        assert record["ranks"].get("TP") == 1 and record["date"] == "2026-01-02", text
        if "accept len: " in text:
            assert record["accept_len"] == VALUES["accept len"], text   # never cap len or block accept len
        if "cap len: " in text:
            assert record["cap_len"] == VALUES["cap len"] and record["block_accept_len"] == 9.25, text
        if "accept rate: " in text:
            assert record["accept_rate"] == VALUES["accept rate"], text
        if " graph: " in text:
            assert record["graph"] is False and record["graph_backend"] in ("cuda", "cpu"), text
        else:
            assert "graph" not in record
        assert record["forward_ct"] == (FORWARD_CT if "batch [" in text else None), text


@pytest.mark.parametrize("version", RELEASES)
def test_every_prefill_line_a_release_can_print_is_read_back(version):
    lines = rendered_lines(package(version), "Prefill batch")
    assert lines
    for text in lines:
        record = parse_line("[2026-01-02 03:04:05 TP0] " + text)
        assert record is not None and record["kind"] == "prefill", text
        assert record["running_req"] == VALUES["#running-req"], text
        if "input throughput (token/s): " in text:
            assert record["input_throughput"] == VALUES["input throughput (token/s)"], text
        assert record.get("graph") is (False if " graph: " in text else None), text


def test_which_releases_print_what():
    """The facts docs/serving.md states, checked against the wheels: graph field from 0.4.7, accept rate
    from 0.5.4, the comma head from 0.5.5 (0.5.4 always prints the forward counter)."""
    def decode(version):
        return rendered_lines(package(version), "Decode batch")
    assert not any(" graph: " in t for t in decode("0.4.6"))
    assert all(" graph: " in t for t in decode("0.4.7"))
    assert not any("accept rate" in t for t in decode("0.5.3"))
    assert any("accept rate" in t for t in decode("0.5.4"))
    assert all(t.startswith("Decode batch. ") for t in decode("0.5.3"))
    assert all(t.startswith("Decode batch [") for t in decode("0.5.4"))
    assert any("cap len: " in t for t in decode("0.5.23"))
    prefill = rendered_lines(package("0.5.6"), "Prefill batch") + rendered_lines(package("0.5.9"), "Prefill batch")
    assert [" graph: " in t for t in prefill] == [False] * 3 + [True] * 3


def test_a_window_of_one_release_gives_its_buckets():
    pkg = package("0.5.23")
    text = rendered_lines(pkg, "Decode batch")[-1]
    log = "".join("[2026-01-02 03:04:%02d TP0] %s\n" % (second, text) for second in range(6))
    out = figures(log)
    assert out["decode_lines"] == 6 and list(out["buckets"]) == ["32-63"]
    bucket = out["buckets"]["32-63"]
    assert bucket["count"] == 6 and bucket["steady"] == 5     # the first line of the window is after idle
    assert bucket["median_gen_throughput"] == 1234.5 and bucket["median_accept_len"] == 3.25
    assert out["graph"] == {"true": 0, "false": 6, "absent": 0}
