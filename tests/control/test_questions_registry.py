"""A question is one declaration: the registry's records are what the report's answers block lists, in order,
each answer comes from its own record's function, and a failing answerer costs only its own answer."""
import json

from gpudiag.findings import QUESTIONS, host_answers
from gpudiag.findings.questions import Question
from gpudiag.models import HostResult
from tests.control.test_report_verdict_cli import FLEET3, invoke


def test_every_question_is_one_record_with_a_unique_id_in_order():
    ids = [q.qid for q in QUESTIONS]
    assert ids == [f"Q{n}" for n in range(1, len(ids) + 1)]
    assert all(isinstance(q, Question) and q.text.endswith("?") and callable(q.render) for q in QUESTIONS)


def test_the_report_lists_the_registry_s_questions_with_their_wording():
    doc = json.loads(invoke("report", FLEET3, "--json").output)
    listed = [(q["id"], q["question"]) for q in doc["answers"]["questions"]]
    assert listed == [(q.qid, q.text) for q in QUESTIONS]
    assert doc["answers"]["coverage"].split(" questions")[0].endswith(f"of {len(QUESTIONS)}")


def test_a_failing_answerer_costs_only_its_own_answer(monkeypatch):
    import gpudiag.findings.questions as registry

    def broken(host):
        raise KeyError("odd data")

    changed = list(registry.QUESTIONS)
    changed[1] = Question(changed[1].qid, changed[1].text, broken, changed[1].render)
    monkeypatch.setattr(registry, "QUESTIONS", tuple(changed))
    answers = host_answers(HostResult(name="h", address="h", status="ok", probes={}))
    assert [a.qid for a in answers] == [q.qid for q in changed]
    assert answers[1].text == "not checked — this host's data could not be read (KeyError)"
    assert all(a.status == "not checked" for a in answers)
