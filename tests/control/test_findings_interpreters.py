"""Facts from two interpreters: torch read by the probing Python while sglang was read from the server's venv."""
from pathlib import Path

from gpudiag.findings import all_findings
from gpudiag.findings.facts import host_facts
from gpudiag.models import HostResult, ProbeResult
from gpudiag.run_records import LoadedRun, RunManifest

SERVING = "/opt/sglang/.venv/bin/python"


def host(torch_caps_interpreter=None, probing="/usr/bin/python3"):
    caps = {"torch_version": "2.0.1", "has_foreach_copy": False, "checks": {}}
    if torch_caps_interpreter:
        caps["interpreter"] = {"path": torch_caps_interpreter, "why": "live_server"}
    probes = {"env": {"python": {"executable": probing}, "torch": {"available": True, "version": "2.0.1"}},
              "torch_caps": caps,
              "sglang_source": {"found": True, "version": "0.5.11", "interpreter": {"path": SERVING,
                                                                                     "why": "live_server"}}}
    return HostResult(name="h1", status="ok",
                      probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def findings_of(h):
    run = LoadedRun(path=Path("."), manifest=RunManifest(run_id="r", kind="scan", started_at="2026-01-01T00:00:00Z"),
                    hosts=(h,))
    return {f.id: f for f in all_findings(run)}


def test_torch_from_the_probing_python_is_not_judged_against_the_servers_sglang():
    found = findings_of(host())
    assert "copies.no_foreach_copy" not in found            # that torch may not be the one sglang runs with
    other = found["sglang.torch_other_interpreter"]
    assert SERVING in other.evidence[0].text and "/usr/bin/python3" in other.evidence[0].text
    assert f"--python {SERVING}" in other.recommendation
    facts = host_facts(host())
    assert facts.torch_elsewhere and facts.sglang_interpreter == f"{SERVING} (live_server)"
    assert facts.torch_interpreter == "/usr/bin/python3 (ran the probes)"


def test_torch_caps_run_in_the_serving_interpreter_is_judged():
    found = findings_of(host(torch_caps_interpreter=SERVING))
    assert "copies.no_foreach_copy" in found and "sglang.torch_other_interpreter" not in found
    assert not host_facts(host(torch_caps_interpreter=SERVING)).torch_elsewhere


def test_one_interpreter_for_everything_is_judged_as_before():
    found = findings_of(host(probing=SERVING))
    assert "copies.no_foreach_copy" in found and "sglang.torch_other_interpreter" not in found


def test_sglang_not_found_still_names_where_it_was_looked_for_and_judges_torch():
    h = host()
    h.probes["sglang_source"].data["found"] = False
    assert host_facts(h).sglang_interpreter == f"{SERVING} (live_server)" and not host_facts(h).torch_elsewhere
    assert "copies.no_foreach_copy" in findings_of(h)
