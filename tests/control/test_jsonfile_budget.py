"""Host documents are decoded within a budget: values, string length and depth are refused before the
tree is built, each with a reason naming the limit; documents within the limits read as json.loads reads them."""
import json
import tracemalloc
from pathlib import Path

import pytest

from gpudiag import jsonfile
from gpudiag.jsonfile import DocumentError, decode_document


@pytest.mark.parametrize("text", [
    '{"schema": 1, "probes": {"env": {"status": "ok", "data": {"a": [1, 2.5, "x,y:{[", null, true]}}}}',
    '["a \\\\", "b \\"quoted\\" , : [ {", "\\\\\\"", "\\u00e9\\ud83d\\ude00"]',
    '[[[[]]], {}, [{}], {"k": {"k": []}}]',
    '"a plain string"',
    '  42  ',
])
def test_documents_within_the_limits_read_as_json_loads_reads_them(text):
    assert decode_document(text) == json.loads(text)


def test_commas_and_brackets_inside_strings_are_not_counted():
    text = json.dumps(["," * (jsonfile.MAX_VALUES + 10), "[" * 500])
    assert decode_document(text)[1] == "[" * 500


def test_more_values_than_the_limit_is_refused_naming_it():
    text = "[" + ",".join(["0"] * (jsonfile.MAX_VALUES + 1)) + "]"
    with pytest.raises(DocumentError, match=r"more than 1,000,000 values \(the limit\)"):
        decode_document(text)


def test_a_dense_document_of_tiny_objects_is_refused_without_building_it():
    text = "[" + ",".join(["{}"] * 3_000_000) + "]"   # 9 MB; json.loads would build 3 million dicts
    tracemalloc.start()
    with pytest.raises(DocumentError, match="values"):
        decode_document(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * len(text)


def test_a_string_over_the_limit_is_refused_naming_it():
    text = json.dumps({"short": "x", "long": "y" * (jsonfile.MAX_STRING_CHARS + 1), "after": "z"})
    with pytest.raises(DocumentError, match="a string is longer than 8 Mi characters"):
        decode_document(text)
    at_limit = json.dumps(["y" * jsonfile.MAX_STRING_CHARS])
    assert len(decode_document(at_limit)[0]) == jsonfile.MAX_STRING_CHARS


@pytest.mark.parametrize("depth, refused", [(100, False), (101, True)])
def test_depth_is_counted_across_both_kinds_of_bracket(depth, refused):
    opens = "".join("[" if i % 2 == 0 else '{"k":' for i in range(depth))
    closes = "".join("]" if i % 2 == 0 else "}" for i in reversed(range(depth)))
    text = opens + "1" + closes
    if refused:
        with pytest.raises(DocumentError, match="nested deeper than 100 levels"):
            decode_document(text)
    else:
        assert decode_document(text) is not None


def test_an_unclosed_string_is_not_valid_json():
    with pytest.raises(DocumentError, match="a string is never closed"):
        decode_document('["abc", "de')


@pytest.mark.parametrize("text", ["[1, 2", "[}", "{]", "[1,,2]"])
def test_broken_documents_are_not_valid_json(text):
    with pytest.raises(DocumentError, match="not valid JSON"):
        decode_document(text)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 33])
def test_chunk_boundaries_anywhere_give_the_same_verdict(monkeypatch, chunk):
    # A string inside one chunk is never longer than a chunk: the limit is checked across chunks only.
    assert jsonfile.CHUNK_CHARS <= jsonfile.MAX_STRING_CHARS
    monkeypatch.setattr(jsonfile, "CHUNK_CHARS", chunk)
    monkeypatch.setattr(jsonfile, "MAX_STRING_CHARS", 40)
    monkeypatch.setattr(jsonfile, "MAX_VALUES", 30)
    ok = [json.dumps({"a \\": ["x,y", '"{[', 1, {"b": '\\"'}], "c": "s" * 40}),
          json.dumps({"k": [[["deep"]], "é😀", "\\" * 10 + '"']}, ensure_ascii=False)]
    for text in ok:
        assert decode_document(text) == json.loads(text), text
    with pytest.raises(DocumentError, match="a string is longer than"):
        decode_document('["' + "s" * 41 + '"]')
    with pytest.raises(DocumentError, match="more than 30 values"):
        decode_document("[" + ",".join(["{}"] * 31) + "]")
    with pytest.raises(DocumentError, match="never closed"):
        decode_document('["abc", "d\\"e')


def test_a_dense_frame_is_refused_at_the_chunk_that_passes_the_limit():
    text = "[" + ",".join(["{}"] * 20_000_000) + "]"   # 60 MB
    tracemalloc.start()
    with pytest.raises(DocumentError, match="values"):
        decode_document(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * jsonfile.CHUNK_CHARS            # working copies of a chunk or two, not of the text


def test_a_frame_under_the_value_limit_whose_values_cost_more_than_its_budget_is_refused():
    text = "[" + ",".join(["{}"] * 300_000) + "]"   # 0.9 MB, under the value limit; ~21 MiB of dicts once built
    with pytest.raises(DocumentError, match=r"more than 8 MiB once decoded \(the limit: 2.0x the document's size"):
        decode_document(text)
    small = "[" + ",".join(["{}"] * 50_000) + "]"   # what a small document may cost: the floor
    assert len(decode_document(small)) == 50_000


FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3" / "hosts"


@pytest.mark.parametrize("name", ["gpu-a", "gpu-b"])  # deep and light; gpu-c was unreachable
def test_recorded_host_documents_cost_well_within_the_budget(name):
    doc = json.loads((FLEET3 / f"{name}.json").read_text())
    text = json.dumps(doc["probes"], sort_keys=True)   # as the runner frames it
    scan = jsonfile._BudgetScan(jsonfile.decoded_budget(len(text)))
    scan.feed(text)
    assert scan.decoded < jsonfile.decoded_budget(len(text)) / 2
    assert scan.decoded < 6 * len(text)   # estimated at 3-6x, built at 1.7-3.7x


def test_an_accepted_document_just_under_the_limit_costs_at_most_five_times_its_bytes():
    # Strings of 56 characters: estimated at 1.98x their text, under the 2.0x limit; shorter ones are refused.
    item = '"' + "x" * 56 + '"'
    count = 12 * 2**20 // (len(item) + 1)
    text = "[" + ",".join([item] * count) + "]"
    assert len(text) > jsonfile.MIN_DECODED_BYTES   # past the floor: the ratio is the bound
    tracemalloc.start()
    doc = decode_document(text)
    built = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(doc) == count
    # Built objects under 2.5x: with the frame's bytes and its text (1x each), under 4.5x its size in all.
    assert built + 2 * len(text) < 4.5 * len(text)
    with pytest.raises(DocumentError, match="once decoded"):   # 40 characters: estimated at 2.35x
        decode_document(text.replace('"' + "x" * 56 + '"', '"' + "x" * 40 + '"'))
