"""The answers' structured values in `report --json` are what docs/report-json.md says they are, and the one saving
of the recorded fleet reads the same in Q5's value, the finding, its text and Next steps."""
import json
import re
from pathlib import Path

from tests.control.test_report_verdict_cli import FLEET3, invoke

DOC = Path(__file__).resolve().parents[2] / "docs" / "report-json.md"


def _documented(qid):
    """The keys the docs name for one question's value: every identifier inside its bullet."""
    text = DOC.read_text(encoding="utf-8")
    bullet = re.search(rf"^- \*\*{qid}\*\* (.*?)(?=^- \*\*Q|^#|\Z)", text, re.S | re.M).group(1)
    return set(re.findall(r"[a-z_]+", bullet.split("`:")[0]))


def _keys(value):
    """Every key of a value, nested objects and lists of objects included."""
    found = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(key)
            found |= _keys(inner)
    elif isinstance(value, list):
        for item in value:
            found |= _keys(item)
    return found


def test_each_answer_value_key_is_documented():
    doc = json.loads(invoke("report", FLEET3, "--json").output)
    values = {q["id"]: [a["value"] for a in q["answers"]] for q in doc["answers"]["questions"]}
    for qid in ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9", "Q10"):
        present = set().union(*(_keys(v) for v in values[qid] if v))
        assert present, qid
        missing = present - _documented(qid)
        assert not missing, (qid, missing)


def test_the_recorded_fleet_states_one_saving_everywhere():
    doc = json.loads(invoke("report", FLEET3, "--json").output)
    [q5] = [q for q in doc["answers"]["questions"] if q["id"] == "Q5"]
    stated = {g["saving_us_per_step"] for a in q5["answers"] if a["value"] for g in a["value"]["gpus"]}
    claimed = [f for f in doc["findings"] if f["saving_us_per_step"] is not None]
    assert claimed, "the recorded fleet measured a saving"
    markdown = invoke("report", FLEET3, "--markdown").output
    steps = markdown.split("## Next steps")[1].split("## Appendix")[0]
    for finding in claimed:
        saving = finding["saving_us_per_step"]
        assert saving in stated                                     # a number Q5 states
        assert f"saves {saving} µs per decode step" in finding["recommendation"]
        assert f"saves {saving} µs per decode step" in steps
    # Every "µs per decode step" the main report claims is one of Q5's numbers.
    main = markdown.split("## Appendix")[0]
    claims = {float(x) for x in re.findall(r"(\d+(?:\.\d+)?) µs per decode step", main)}
    assert claims <= stated, claims - stated


def test_q5_names_the_field_sets_each_gpus_time_budget_did_not_reach(tmp_path):
    from tests.control.test_report_verdict_cli import answers_of, host_doc, write_run
    a = host_doc("gpu-a")
    gpus = a["probes"]["copy_bench"]["data"]["gpus"]
    gpus[1].update(lost_to_budget=["eagle_draft_extend/bs32/h7168"], lost_field_sets=["eagle_draft_extend"],
                   time_needed_s=12.4)
    write_run(tmp_path, [a])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [q5] = answers["Q5"]
    assert q5["status"] == "partial"
    assert q5["value"]["lost_to_budget"] == [{"gpu": str(gpus[1]["index"]), "field_sets": ["eagle_draft_extend"],
                                              "needs_s": 12.4}]
    assert f"GPU {gpus[1]['index']}: eagle_draft_extend not measured (time budget spent, about 12 s more would " \
           "measure it)" in q5["answer"]
