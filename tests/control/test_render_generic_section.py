"""The appendix section for probes without one of their own: bounded, escaped, leaves of any depth."""

from gpudiag.models import HostResult, ProbeResult
from gpudiag.render.generic_section import MAX_ROWS, generic_sections


def host(**probes):
    return HostResult(name="h", status="ok", probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def test_probes_with_their_own_sections_are_left_to_them():
    assert generic_sections(host(env={"hostname": "x"}, copy_bench={"gpus": []})) == []


def test_nested_data_becomes_key_paths_and_long_data_is_cut_with_a_count():
    data = {"a": {"b": [1, {"c": None}]}, "many": list(range(MAX_ROWS + 5))}
    text = "\n".join(generic_sections(host(extra=data)))
    assert "#### Probe extra" in text
    assert "| a.b\\[0\\] | 1 |" in text or "| a.b[0] | 1 |" in text
    assert "a.b\\[1\\].c | null" in text or "a.b[1].c | null" in text
    assert "7 more values are in the stored host file." in text


def test_host_text_cannot_break_the_table_or_open_html():
    text = "\n".join(generic_sections(host(extra={"k|<img>": "v | <script>\n# heading"})))
    body = [line for line in text.splitlines() if line.startswith("| k\\|")]
    assert len(body) == 1 and body[0].count(" | ") == 2  # key, value, meaning: nothing more
    assert "\\<script>" in text and "<" not in text.replace("\\<", "")  # every < escaped


def test_a_probe_that_did_not_run_ok_has_no_section():
    h = HostResult(name="h", status="ok", probes={"extra": ProbeResult(status="error", data=None)})
    assert generic_sections(h) == []
