"""Live outcome collection: any Question → Answer callable as an arm, incremental JSONL, resume.

The answer functions below are test doubles (named as such) standing in for live models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kgwise.eval.route.live import LiveArm, collect_outcomes
from kgwise.types import Answer, Choice, Question, Usage

QS = [
    Question(
        f"q{i}", f"question {i}?", choices=(Choice("A", "x"), Choice("B", "y")), gold=("A" if i % 2 else "B",)
    )
    for i in range(6)
]


def test_collect_and_resume(tmp_path: Path) -> None:
    calls: list[str] = []

    def always_a(q: Question) -> Answer:  # test double of a live model
        calls.append(q.id)
        return Answer(q.id, "A", usage=Usage(input_tokens=10, output_tokens=1, calls=1))

    def oracle_kgm(q: Question) -> Answer:  # test double of a KG model
        return Answer(q.id, q.gold[0], usage=Usage(calls=1))

    arms = [
        LiveArm("kgm", "KGM", oracle_kgm),
        LiveArm("llm", "LLM", always_a, per_call=1.0),
    ]
    path = tmp_path / "outcomes.jsonl"
    table, totals = collect_outcomes(arms, QS[:4], path, n_params={"llm": 100}, show_progress=False)
    assert table.unit == "calls" and table.correct[:, 0].all()
    np.testing.assert_array_equal(table.correct[:, 1], [False, True, False, True])
    np.testing.assert_array_equal(table.cost[:, 1], 1.0)
    assert totals["llm"]["calls"] == 4 and totals["llm"]["compute_proxy"] == 100 * 11 * 4
    assert totals["kgm"]["accuracy"] == 1.0
    calls.clear()
    table, _ = collect_outcomes(arms, QS, path, show_progress=False)  # resumes: only the two new questions
    assert calls == ["q4", "q5"] and table.n_questions == 6
    assert len(path.read_text().splitlines()) == 13  # the fingerprint and 12 outcomes
