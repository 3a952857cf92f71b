"""``kgwise fit --log FILE``: fit the pipeline from outcomes the user already has, without calling an arm.

A graded log (:mod:`kgwise.datasets.user`: per question, each arm's answer, whether it was right, its cost
or usage, and optional signals) stands in for step 1 of :mod:`kgwise.app.fit`: every graded outcome
becomes the logged call of that arm on that question — ``cost`` as given (in the budget's unit), else the
``usage`` priced by the arm's config (``per_call``, ``price_model`` by exact name) — and steps 2–6 run
on them unchanged: held-out calibration questions, the router's settings chosen by cross-fitting, the
warm start, the replay and the report. The free arms' answers and first signals make the ``question+free``
and ``free`` contexts, as live answers do. Nothing is spent: the report says 0 calls made.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgwise.app.arms import arm_cost
from kgwise.app.fit import FitReport, LoggedCall, _fit_from_log, refuse_pending
from kgwise.app.pipeline import Pipeline
from kgwise.datasets.user import read_graded_log
from kgwise.errors import DataError
from kgwise.types import Question, Usage

__all__ = ["fit_log"]


def fit_log(pipeline: Pipeline, path: Path, echo: Callable[[str], None] = print, force: bool = False
            ) -> FitReport:
    """Fit ``pipeline`` on the graded log at ``path`` (module docstring). Every arm the log names must be
    an arm of the config (``DataError`` naming it); refuses while decisions await feedback unless
    ``force``."""
    refuse_pending(pipeline, force, "kgwise fit --log … --force")
    config = pipeline.config
    arms = {a.name: a for a in config.arms}
    log = read_graded_log(path, list(arms))
    questions: list[Question] = []
    calls: dict[tuple[str, str], LoggedCall] = {}
    for q in log.questions:
        if not q.text.strip():
            raise DataError(f"question {q.id!r} has no text: the router embeds the question's text", path)
        questions.append(Question(q.id, q.text))
        for name, o in q.arms.items():
            cost = o.cost if o.cost is not None else arm_cost(arms[name], o.usage or Usage())
            calls[(name, q.id)] = LoggedCall(name, q.id, o.answer, {}, o.correct, float(cost),
                                             o.usage or Usage(calls=1, cost=float(cost)), o.signals)
    missing = [a for a in arms if not any(n == a for n, _ in calls)]
    if missing:
        raise DataError(f"the graded log grades no outcome of arm(s) {', '.join(missing)} of {config.path}: "
                        "the router could not learn them", path)
    echo(f"fit: {len(questions)} questions × {len(arms)} arms from the graded log {path} "
         f"({len(calls)} outcomes); no arm is called")
    return _fit_from_log(pipeline, questions, calls, 0.0, 0.0, 0, len(calls), echo)
