"""The investigation's questions, each one declaration: its id, its wording, the function that answers it on one
host, and the function that renders its structured value (the value docs/report-json.md documents under the
question's id) into the answer's sentence. Adding a question is adding one `Question` here; the report's answers
block, the coverage line and the JSON entries all read this one tuple."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from gpudiag.findings.answers import ANSWERED, NOT_CHECKED, Answer
from gpudiag.findings.answers_decode import q11_step_time, q11_text, q12_bandwidth, q12_text
from gpudiag.findings.answers_decode import q13_speculation_cost, q13_text, q14_collectives, q14_text
from gpudiag.findings.answers_dflash import q4_dflash, q4_text
from gpudiag.findings.answers_live import q8_live_matches_disk, q8_text, q9_serving, q9_text, sglang_scoped
from gpudiag.findings.answers_measured import q5_copy_cost, q5_text, q6_graph_breaks, q6_text
from gpudiag.findings.answers_serving import q10_speculation, q10_text
from gpudiag.findings.answers_source import q2_grouped_copy, q2_text, q3_eagle_batching, q3_text
from gpudiag.findings.answers_source import q7_integrity, q7_text
from gpudiag.findings.answers_torch import q1_foreach_copy, q1_text
from gpudiag.derived import remembered
from gpudiag.models import HostResult


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    answer: Callable[[HostResult], Answer]  # one host's answer, or `not checked — <reason>`
    render: Callable[[dict[str, Any]], str]  # the sentence of a checked answer, from its documented value


QUESTIONS: tuple[Question, ...] = (
    Question(
        "Q1",
        "Is torch._foreach_copy_ present and correct for the replay dtype pairs, on CPU and each GPU?",
        q1_foreach_copy,
        q1_text,
    ),
    Question(
        "Q2",
        "Which _grouped_foreach_copy_ definitions exist, with which fast paths, and which does each caller use?",
        sglang_scoped(q2_grouped_copy),
        q2_text,
    ),
    Question(
        "Q3",
        "Do the EAGLE draft and draft-extend replays batch their copies, hidden_states on its own copy_()?",
        sglang_scoped(q3_eagle_batching),
        q3_text,
    ),
    Question(
        "Q4",
        "Is DFlash present; is its draft CUDA graph on; if off, which guard and which flag?",
        sglang_scoped(q4_dflash),
        q4_text,
    ),
    Question(
        "Q5",
        "What does the replay copy cost per decode step on each GPU, and what would switching save?",
        q5_copy_cost,
        q5_text,
    ),
    Question(
        "Q6",
        "Where do CUDA graphs break (algorithm × batch size × draft tokens), with which signature?",
        q6_graph_breaks,
        q6_text,
    ),
    Question("Q7", "Is the installed code the released code?", sglang_scoped(q7_integrity), q7_text),
    Question("Q8", "Does the live server run what is on disk (flags, interpreter)?", q8_live_matches_disk, q8_text),
    Question("Q9", "What is serving now?", q9_serving, q9_text),
    Question("Q10", "Is speculative decoding paying off on each server?", q10_speculation, q10_text),
    Question(
        "Q11",
        "Where does each decode step go on each server: weights and KV bytes, compute, GPU-to-GPU communication, "
        "fixed overhead?",
        q11_step_time,
        q11_text,
    ),
    Question("Q12", "Is decode memory-bandwidth-bound here?", q12_bandwidth, q12_text),
    Question(
        "Q13",
        "What does verifying the draft block cost at this batch, and up to how many running requests does "
        "speculation pay?",
        q13_speculation_cost,
        q13_text,
    ),
    Question("Q14", "What do the TP/EP collectives cost per step on this interconnect?", q14_collectives, q14_text),
)


@remembered
def host_answers(host: HostResult) -> list[Answer]:
    """Every question for one host, in QUESTIONS order, a checked answer's sentence rendered from its value; a
    question whose data cannot be read says so instead of failing."""
    answers = []
    for question in QUESTIONS:
        try:
            found = question.answer(host)
            if found.status != NOT_CHECKED and isinstance(found.value, dict):
                found = replace(found, text=question.render(found.value))  # the sentence is its value's, always
            answers.append(found)
        except Exception as exc:  # noqa: BLE001 - odd host data costs this answer, never the report
            answers.append(
                Answer(
                    question.qid,
                    NOT_CHECKED,
                    f"not checked — this host's data could not be read ({type(exc).__name__})",
                )
            )
    return answers


def coverage_line(per_host: Mapping[str, list[Answer]]) -> str:
    """'N of M questions answered on K hosts' (a question counts when every host answered it in full)."""
    if not per_host:
        return "no hosts: no question could be answered"
    total = len(QUESTIONS)
    answered = sum(1 for i in range(total) if all(a[i].status == ANSWERED for a in per_host.values()))
    partly = sum(1 for i in range(total) if any(a[i].status != NOT_CHECKED for a in per_host.values())) - answered
    text = f"{answered} of {total} questions answered on {len(per_host)} host{'s' if len(per_host) != 1 else ''}"
    return text + (f" ({partly} more in part)" if partly else "")
