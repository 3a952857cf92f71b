"""Free-text answers of the GPT family on WebQSP (Tan et al. 2023): ``idx<TAB>question<TAB>answer`` lines
for ChatGPT (Feb/Mar 2023), text-davinci-001/002/003, FLAN-T5-XXL (WebQSP test + train) and GPT-4 (499
questions). Nothing is scored in the files: :func:`score_answers` matches each answer against the gold
names with :func:`kgwise.grading.match_answer` (normalised exact match or whole-word containment).

Tokens are not recorded: the input is the bare question and the output the answer text, both estimated
with :func:`~kgwise.eval.recorded.estimate_tokens`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kgwise.errors import DataError
from kgwise.eval.recorded import Outcome, estimate_tokens, question_key
from kgwise.grading import match_answer

__all__ = ["GPT_FILES", "RawAnswer", "read_answers", "score_answers"]

GPT_FILES = {
    "chatgpt": "predictions/gpt_family_webqsp/WQSP_chatgpt_answers_March.txt",
    "chatgpt-feb": "predictions/gpt_family_webqsp/WQSP_chatgpt_answers_February.txt",
    "text-davinci-003": "predictions/gpt_family_webqsp/davinci3_answers-WQSP.txt",
    "text-davinci-002": "predictions/gpt_family_webqsp/davinci2_answers-WQSP.txt",
    "text-davinci-001": "predictions/gpt_family_webqsp/davinci1_answers-WQSP.txt",
    "flan-t5-xxl": "predictions/gpt_family_webqsp/T5xxl_answers-WQSP.txt",
    "gpt-4": "predictions/gpt_family_webqsp/WQSP_GPT_4.txt",
}


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """One line of a GPT-family file."""

    idx: int
    question: str
    answer: str


def read_answers(path: str | Path) -> list[RawAnswer]:
    """The ``idx<TAB>question<TAB>answer`` lines of ``path`` (the answer may be empty)."""
    p = Path(path)
    if not p.is_file():
        raise DataError("GPT-family answers file not found", p)
    out: list[RawAnswer] = []
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            parts = line.split("\t", 2)
            if len(parts) < 2 or not parts[0].strip().isdigit():
                raise DataError("expected 'idx<TAB>question<TAB>answer'", p, n)
            answer = parts[2] if len(parts) == 3 else ""
            out.append(RawAnswer(int(parts[0]), parts[1].strip(), answer.strip()))
    return out


def score_answers(rows: Sequence[RawAnswer], gold: Mapping[str, Sequence[str]]) -> list[Outcome]:
    """Score the rows whose :func:`question_key` is in ``gold`` (key → gold names); others are dropped.

    ``correct`` = :func:`match_answer` (a gold name equals or occurs whole-word in the answer).
    """
    out: list[Outcome] = []
    for r in rows:
        names = gold.get(question_key(r.question))
        if names is None:
            continue
        out.append(
            Outcome(
                qid="",
                question=r.question,
                correct=match_answer(r.answer, names),
                prediction=r.answer,
                input_tokens=estimate_tokens(r.question),
                output_tokens=estimate_tokens(r.answer),
                calls=1,
                tokens_estimated=True,
            )
        )
    return out
