"""Host strings are data: escapes never reach the terminal, injection never reaches the markdown, huge strings
render in bounded time and size, and one host's odd data never breaks the fleet's report (fuzzed leaves of the
recorded fleet, through the same steps as `gpudiag report`)."""
import copy
import io
import json
import os
import random
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from gpudiag.cli import cli
from gpudiag.cli import report as report_cli
from gpudiag.findings import all_findings
from gpudiag.models import HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.render.json_report import render_json
from gpudiag.render.markdown import render_markdown
from gpudiag.render.safe_text import clean, code, console, md
from gpudiag.run_loader import load_run
from gpudiag.verdict import verdict

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\\u202egnp.exe\x9b31m\x07\x00"
INJECTION = "0.5.11\n\n## Findings\n\n<script>alert(1)</script> [click](http://evil) ![x](y) ```\n# fake\n| a | b |"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "250"})


def hostile_run(root):
    run = root / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    doc = json.loads((FLEET3 / "hosts" / "gpu-a.json").read_text())
    doc["name"] = "gpu-a"
    doc["probes"]["sglang_source"]["data"]["version"] = INJECTION + ESCAPES
    doc["probes"]["env"]["data"]["gpus"]["devices"][0]["name"] = ESCAPES + INJECTION
    doc["probes"]["env"]["data"]["hostname"] = INJECTION
    doc["probes"]["deployment"]["data"]["servers"][0]["cmdline"].append(ESCAPES + "\n```\n## Injected")
    down = {"schema": 1, "name": "gpu-c", "status": "unreachable", "reason": ESCAPES + INJECTION}
    manifest = {"schema": 1, "run_id": "r1", "kind": "scan", "started_at": "2026-03-01T00:00:00Z",
                "argv": ["gpudiag", "scan", "all", ESCAPES],
                "hosts": [{"name": "gpu-a", "status": "ok"}, {"name": "gpu-c", "status": "unreachable"}]}
    (run / "run.json").write_text(json.dumps(manifest))
    (run / "hosts" / "gpu-a.json").write_text(json.dumps(doc))
    (run / "hosts" / "gpu-c.json").write_text(json.dumps(down))
    return run


def test_console_strips_escapes_controls_and_bidi(tmp_path):
    result = invoke("report", hostile_run(tmp_path))
    assert result.exit_code == 3, result.output
    for bad in ("\x1b", "\x07", "\x9b", "\u202e", "\x00"):
        assert bad not in result.output
    assert "gnp.exe" in result.output                    # the text stays, only the controls go
    assert "\\u202egnp.exe" in result.output              # the override is shown, escaped, not obeyed


ZERO_WIDTH = ("\u200b", "\u200d", "\u202e", "\u2066", "\ufeff", "\u00ad", "\U000e0067")


def look_alike_run(root):
    """Two hosts whose names differ only by zero-width and other format characters, and a look-alike version."""
    run = root / "runs" / "r2"
    (run / "hosts").mkdir(parents=True)
    doc = json.loads((FLEET3 / "hosts" / "gpu-a.json").read_text())
    doc["probes"]["sglang_source"]["data"]["version"] = "0.5.1\u200d4"
    doc["probes"]["env"]["data"]["hostname"] = "gpu-a" + "".join(ZERO_WIDTH)
    (run / "hosts" / "gpu-a.json").write_text(json.dumps(dict(doc, name="gpu-a")))
    down = {"schema": 1, "name": "gpu-a2", "status": "unreachable", "reason": "gpu\u200b-a: no route" + "\u2067"}
    (run / "hosts" / "gpu-a2.json").write_text(json.dumps(down))
    manifest = {"schema": 1, "run_id": "r2", "kind": "scan", "started_at": "2026-03-01T00:00:00Z",
                "argv": ["gpudiag", "scan", "gpu\u200b-a"],
                "hosts": [{"name": "gpu-a", "status": "ok"}, {"name": "gpu-a2", "status": "unreachable"}]}
    (run / "run.json").write_text(json.dumps(manifest))
    return run


@pytest.mark.parametrize("args", [(), ("--markdown",), ("--json",)])
def test_zero_width_and_format_characters_are_shown_escaped_in_console_markdown_and_json(tmp_path, args):
    result = invoke("report", look_alike_run(tmp_path), *args)
    assert result.exit_code == 3, result.output
    for raw in ZERO_WIDTH + ("\u2067",):
        assert raw not in result.output, repr(raw)
    shown = result.output.replace("\\\\", "\\")           # markdown doubles the backslash; json doubles it too
    assert "gpu\\u200b-a: no route\\u2067" in shown, result.output[-3000:]


def test_the_format_character_table_covers_unicode_category_cf():
    import sys
    import unicodedata

    from gpudiag.render import safe_text

    missing = [hex(c) for c in range(sys.maxunicode + 1)
               if unicodedata.category(chr(c)) == "Cf" and not safe_text._FORMAT.fullmatch(chr(c))]
    assert missing == []


def test_markdown_escapes_headings_html_links_and_fences(tmp_path):
    text = invoke("report", hostile_run(tmp_path), "--markdown").output
    lines = outside_fences(text)
    assert lines.count("## Findings") == 1 and "## Injected" not in lines and "# fake" not in lines
    # Escaped, the text stays readable and renders as text: no HTML tag, link or image can open.
    assert not re.search(r"(?<!\\)<script", text) and not re.search(r"(?<!\\)\]\(", text)
    assert not re.search(r"(?<!\\)!\[", text)
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in text


def outside_fences(text):
    """The lines a markdown reader sees outside code blocks (CommonMark: a fence closes only with at least as
    many backticks as opened it); every block the report opens must close."""
    outside, opened = [], 0
    for line in text.splitlines():
        run = len(line) - len(line.lstrip("`"))
        if not opened and run >= 3:
            opened = run
        elif opened and run >= opened and not line.strip("`").strip():
            opened = 0
        elif not opened:
            outside.append(line)
    assert not opened, "a code block was left open"
    return outside


def test_huge_string_renders_in_seconds_with_bounded_output(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    doc = json.loads((FLEET3 / "hosts" / "gpu-b.json").read_text())
    doc["probes"]["env"]["data"]["gpus"]["devices"][0]["name"] = "\x1b[31m" + "A" * (64 << 20)
    (run / "hosts" / "gpu-b.json").write_text(json.dumps(doc))
    (run / "run.json").write_text(json.dumps({"schema": 1, "run_id": "r1", "kind": "scan",
                                              "started_at": "2026-03-01T00:00:00Z",
                                              "hosts": [{"name": "gpu-b", "status": "ok"}]}))
    for args in (("--markdown",), ()):
        started = time.monotonic()
        result = invoke("report", run, *args)
        assert time.monotonic() - started < 30
        assert result.exit_code in (0, 1, 4), result.output
        assert len(result.output) < 200_000
        assert "… (67108869 bytes)" in result.output.replace("\n", "").replace("│", "").replace(" ", "").replace(
            "…(67108869bytes)", "… (67108869 bytes)")


def test_safe_text_units():
    assert console("a\x1b[2Jb\u202ec\nd") == "ab\\u202ec d"     # controls go, format characters show escaped
    assert console("gpu\u200b1\U000e0041") == "gpu\\u200b1\\U000e0041"
    assert clean("x" * 600).endswith("… (600 bytes)") and len(clean("x" * 600)) < 530
    assert md("[a](http://x) <b> | `c`") == "[a\\](http:\\//x) \\<b> \\| \\`c\\`"
    assert md("# title") == "\\# title" and md("- item") == "\\- item"
    assert code("a`b") == "``a`b``" and code("`x`") == "`` `x` ``"


# ---- fuzz: every kind of odd leaf, through the report's own steps ----------------------------------------------

MUTATIONS = (None, 7, -1e308, True, "", "\x1b[2J" + "Z" * 5000 + "\n## x", [1, "two", None], {"odd": {"deep": []}})


def _nested(depth):
    value = "bottom"
    for _ in range(depth):
        value = {"k": [value]}
    return value


def _leaves(value, path=()):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, path + (index,))
    else:
        yield path


def _replace(doc, path, value):
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


def _render_everything(hosts):
    run = LoadedRun(path=Path("."), manifest=load_run(FLEET3).manifest, hosts=tuple(hosts))
    cleaned = report_cli.clean_run(run)
    findings = all_findings(cleaned)
    result = verdict(cleaned, findings)
    render_markdown(cleaned, findings, {}, result)
    json.loads(render_json(cleaned, findings, result))
    out = io.StringIO()
    original = report_cli.Console
    report_cli.Console = lambda *a, **k: Console(file=out, width=200)
    try:
        report_cli._console_summary(cleaned, findings, result)
    finally:
        report_cli.Console = original


@pytest.mark.parametrize("host_name", ["gpu-a", "gpu-b"])
def test_fuzzed_leaves_never_break_any_report(host_name):
    docs = {name: json.loads((FLEET3 / "hosts" / f"{name}.json").read_text()) for name in ("gpu-a", "gpu-b", "gpu-c")}
    leaves = [p for p in _leaves(docs[host_name]) if p]
    rng = random.Random(20260110)
    # Every leaf with GPUDIAG_FUZZ_ALL=1 (minutes); a fixed sample by default.
    count = len(leaves) if os.environ.get("GPUDIAG_FUZZ_ALL") == "1" else min(16, len(leaves))
    sample = rng.sample(leaves, count) + [("probes",), ("probes", "env"), ("probes", "env", "data")]
    for path in sample:
        for value in MUTATIONS + (_nested(400),):
            try:
                mutated = _replace(docs[host_name], path, value)
                hosts = [HostResult.from_dict(mutated)]
            except Exception:      # noqa: BLE001 - a shape the store refuses never reaches the renderers
                continue
            others = [HostResult.from_dict(docs[n]) for n in docs if n != host_name]
            _render_everything(hosts + others)
