"""The one-match reader of the common stats lines (probes/servingstats/strict.py) reads each line it takes
exactly as the key-by-key reader (lines._record) does, on every fixture line, every line each sglang release
can print behind its logging prefix, and the oddities that must send a line to the key-by-key reader."""
from pathlib import Path

import pytest

from probes.servingstats.lines import _record
from probes.servingstats.strict import strict_reader
from tests.probes.sglang_log_formats import logging_prefix, rendered_lines
from tests.sglang_wheels import SkipWheel, site_packages_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"
RELEASES = ("0.4.3", "0.4.6", "0.4.7", "0.4.10", "0.5.3", "0.5.4", "0.5.5", "0.5.6", "0.5.9", "0.5.11",
            "0.5.14", "0.5.23")
PREFIXES = ("", "[2026-01-02 03:04:05] ", "[2026-01-02 03:04:05.123 DP1 TP3 EP3] ", "[03:04:05 TP0] ",
            "2026-01-02 03:04:05 TP0] ", "[DP3 TP3 EP3 scheduler_metrics_mixin.py:222] ", "svc-1  | ",
            "\x1b[32m[2026-01-02 03:04:05 TP0]\x1b[0m ", "[2026-13-45 99:99:99 TP0] ", "  42%|  [2026-01-02 03:04:05] ")


def both(line):
    """(strict reading or None, key-by-key reading), each with its own cache."""
    return strict_reader({})(line), _record(line, {})


def fixture_lines():
    for path in sorted(FIXTURES.glob("*.log")):
        for line in path.read_text().splitlines():
            if "batch" in line and not line.startswith("#fixture "):
                yield line


def mutations(line):
    """Variants that must read the same either way: other prefixes, unknown or glued keys, nan, repeats."""
    head = min(i for i in (line.find("Decode batch"), line.find("Prefill batch")) if i >= 0)
    body = line[head:]
    for prefix in PREFIXES:
        yield prefix + body
    yield line.replace("accept len: ", "draft accept len: ")
    yield line.replace("accept len: ", "block accept len: 9.5, accept len: ")
    yield line.replace("gen throughput (token/s): ", "gen throughput (token/s): nan, x: ")
    yield line.replace("#running-req: ", "#running-req: 7, #running-req: ")
    yield line.replace("token usage: ", "token usaccept rate: 0.3, token usage: ")
    yield line.replace(", #queue-req", ", cuda graph: False, #queue-req")
    yield line.replace("cuda graph: True", "cuda graph: Truly")
    yield line.replace(", ", ",  ", 1)
    yield line + " trailing"
    yield line.replace("batch,", "batch [12],").replace("batch.", "batch [12].")


def test_the_strict_reader_takes_most_fixture_lines_and_reads_them_as_the_key_by_key_reader():
    lines = list(fixture_lines())
    taken = 0
    for line in lines:
        strict, general = both(line)
        if strict is not None:
            taken += 1
            assert strict == general, line
    assert taken >= 0.6 * len(lines), (taken, len(lines))   # the common forms take the fast path


def test_every_variant_reads_the_same_or_is_left_to_the_key_by_key_reader():
    checked = 0
    for line in fixture_lines():
        for variant in mutations(line):
            strict, general = both(variant)
            if strict is not None:
                assert strict == general, variant
                checked += 1
    assert checked > 100


@pytest.mark.parametrize("version", RELEASES)
def test_every_line_a_release_can_print_reads_the_same_either_way(version):
    try:
        package = site_packages_for(version) / "sglang"
    except SkipWheel as exc:
        pytest.skip(str(exc))
    prefix = "[2026-01-02 03:04:05 %s] " % logging_prefix(package)
    for head in ("Decode batch", "Prefill batch"):
        for text in rendered_lines(package, head):
            for line in (prefix + text, "[03:04:05 TP1] " + text, text):
                strict, general = both(line)
                assert strict is None or strict == general, line
