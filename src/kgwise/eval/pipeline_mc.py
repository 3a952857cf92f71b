"""``kgwise eval pipeline --log``'s multiple-choice answer sets: a graded log whose arms give their
``probabilities`` over the choices and whose questions give their ``gold`` choice, replayed through the
live run's coverage check (:func:`kgwise.eval.pipeline_live.coverage_splits`: the same seeded random
halvings, a fresh :class:`kgwise.app.Pipeline` fitted on one half whose arms replay the recorded answers,
the other half asked one question at a time, and each decision's set recomputed per guarantee from the
calibration scores it was made from). A log written by ``eval pipeline --live`` therefore gives, from the
file alone, the figures of the live run's ``coverage_splits`` (``tests/eval/test_pipeline_mc.py``), up to
the draws seeded by each decision's random id (the held-out questions' re-routing before each answer,
:meth:`kgwise.app.calibration.CalibrationSelector.group`), which differ between any two runs.

A graded log holds no choice texts: each question's choices are its arms' probability labels, in the
order the first replayed arm giving them lists them, under the pipeline's own labels A, B, … (sets and
coverage do not depend on the names). Questions where no replayed arm gives probabilities are open and
left out (counted); a question without ``gold``, or where an arm that gives probabilities elsewhere in
the log gives none, is refused naming the file, the line and the field.

**Arms that answer without probabilities.** An arm that gives ``probabilities`` on *no* question of the
log (a hosted model whose replies were parsed for a letter, e.g. the Ollama answers of
``obqa-ollama-dev.jsonl``) is replayed as the live pipeline answers a letter reply without
log-probabilities (:func:`kgwise.llm.answering.letter_reply_probabilities`): all probability on its
answer, uniform over the choices when it gave none. Its LAC score is then 0 (its answer) or 1 (any other
choice), so its calibrated set is its answer alone when the calibration's threshold is below 1 and every
choice otherwise; split conformal holds as for any score (a discrete score only makes the sets coarse).
APS gives such an answer no usable order (every choice scores 1); the replay counts these arms' answers
in ``answer_only``.

Beside the sets, each arm's *attainable* figures on the whole log (:func:`attainable_sets`): how often the
gold choice is among its k most probable choices, and the smallest mean size of a set thresholding its
non-conformity score once for the whole log that still holds the gold choice on ≥ 1 − α of the questions
— in sample and with no guarantee, so a calibrated set of the arm's scores cannot be smaller on average
except by chance.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.app.calibration import nonconformity
from kgwise.app.config import ArmConfig
from kgwise.datasets.user import GradedLog, GradedQuestion, read_graded_log
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError
from kgwise.eval.pipeline import arm_config
from kgwise.eval.pipeline_live import LiveMCConfig, coverage_splits, question_key
from kgwise.eval.route.logs import GradedReplay
from kgwise.llm.answering import letter_reply_probabilities
from kgwise.route.coke import CokeConfig
from kgwise.route.table import OutcomeTable
from kgwise.types import CHOICE_LABELS, Choice, Question, Usage

__all__ = ["MCLog", "attainable_sets", "mc_log", "read_mc_log", "replay_mc_sets"]

Answers = dict[str, dict[str, dict[str, Any]]]
"""Per arm, per :func:`kgwise.eval.pipeline_live._key` of a question, its recorded answer row."""


@dataclass(frozen=True)
class MCLog:
    """A graded log's multiple-choice questions as the coverage check takes them: the questions (choices
    labelled A, B, …, the gold choice), the arms' configs (as ``eval pipeline --log`` replays them:
    :func:`kgwise.eval.pipeline._runners`) and recorded answers, and the ids of the questions left out
    (open, not graded by every replayed arm, or beyond ``--limit``)."""

    questions: list[Question]
    arms: list[ArmConfig]
    answers: Answers
    left_out: list[str]
    answer_only: dict[str, int] = field(default_factory=dict)
    """Per arm that gives no probabilities in the log, how many of its answers were replayed as letter
    replies (module docstring)."""


def mc_log(log: GradedLog, table: OutcomeTable, source: str) -> MCLog | None:
    """The multiple-choice part of ``log`` over the arms of ``table`` (its outcome table for the replay:
    the questions every replayed arm graded, their costs priced), in the log's order (module docstring);
    ``None`` when no replayed arm gives probabilities on any question."""
    names = list(table.arms)
    row_of = {qid: i for i, qid in enumerate(table.qids)}
    answer_only = {n: 0 for n in names
                   if not any(n in q.arms and q.arms[n].probabilities is not None for q in log.questions)}
    kept: list[tuple[GradedQuestion, list[str]]] = []
    left_out: list[str] = []
    texts: dict[str, int] = {}
    for q in log.questions:
        given = [n for n in names if n in q.arms and q.arms[n].probabilities is not None]
        if q.id not in row_of or not given:
            left_out.append(q.id)
            continue
        where = (source, q.line or None)
        missing = [n for n in names if n not in given and n not in answer_only]
        if missing:
            raise DataError(f"arms.{missing[0]}.probabilities missing while arms.{given[0]} gives them: the "
                            "multiple-choice sets replay every arm's probabilities on a question (an arm "
                            "that gives none in the whole log is replayed from its answer alone)", *where)
        if q.gold is None:
            raise DataError("field 'gold' missing: the multiple-choice sets are scored against the gold "
                            "choice", *where)
        labels = list(q.arms[given[0]].probabilities or {})
        if len(labels) > len(CHOICE_LABELS):
            raise DataError(f"arms.{given[0]}.probabilities: {len(labels)} choices, the pipeline takes "
                            f"at most {len(CHOICE_LABELS)}", *where)
        for n in answer_only:
            if q.arms[n].answer and q.arms[n].answer not in labels:
                raise DataError(f"arms.{n}.answer {q.arms[n].answer!r} is not one of the choices "
                                f"arms.{given[0]}.probabilities names ({', '.join(labels)})", *where)
        if q.text in texts:
            raise DataError(f"the text repeats line {texts[q.text]}'s: the pipeline's replay keys "
                            "questions by text", *where)
        texts[q.text] = q.line
        kept.append((q, labels))
    if not kept:
        return None
    questions: list[Question] = []
    answers: Answers = {n: {} for n in names}
    for q, labels in kept:
        ours = {lab: CHOICE_LABELS[i] for i, lab in enumerate(labels)}
        mq = Question(q.id, q.text, tuple(Choice(ours[lab], lab) for lab in labels), (ours[str(q.gold)],))
        questions.append(mq)
        for j, n in enumerate(names):
            o = q.arms[n]
            probs = o.probabilities
            if probs is None:
                probs = letter_reply_probabilities(labels, o.answer)
                answer_only[n] += 1
            answers[n][question_key(mq)] = {
                "prediction": ours.get(o.answer, ""),
                "probabilities": {ours[lab]: float(p) for lab, p in probs.items()},
                "usage": Usage(calls=1, cost=float(table.cost[row_of[q.id], j])).to_dict()}
    return MCLog(questions, [arm_config(table, j) for j in range(table.n_arms)], answers, left_out,
                 answer_only)


def attainable_sets(mc: MCLog, alpha: float, kind: str = "lac") -> dict[str, Any]:
    """Per arm on the whole log: top-k accuracy (the gold choice among its k most probable, k = 1 … the
    number of choices) and the smallest mean size of a set ``{choice : score ≤ t}`` with one ``t`` for
    every question that holds the gold choice on ≥ 1 − ``alpha`` of them (module docstring)."""
    out: dict[str, Any] = {}
    for arm in mc.arms:
        gold_scores: list[float] = []
        all_scores: list[np.ndarray] = []
        ranks: list[int] = []
        for q in mc.questions:
            row = mc.answers[arm.name][question_key(q)]
            labels = [c.label for c in q.choices]
            s = np.asarray(nonconformity(kind, row["probabilities"], labels), dtype=np.float64)
            g = labels.index(q.gold[0])
            gold_scores.append(float(s[g]))
            all_scores.append(s)
            p = np.asarray([row["probabilities"][lab] for lab in labels])
            ranks.append(int(np.sum(p > p[g])) + 1)  # ties count in the gold choice's favour
        k_max = max(len(q.choices) for q in mc.questions)
        need = math.ceil((1 - alpha) * len(gold_scores) - 1e-9)
        t = float(np.sort(gold_scores)[need - 1]) if need > 0 else -math.inf
        out[arm.name] = {
            "top_k_accuracy": {str(k): float(np.mean([r <= k for r in ranks])) for k in range(1, k_max + 1)},
            "smallest_mean_size_covering": float(np.mean([np.sum(s <= t) for s in all_scores])),
        }
    return {"alpha": alpha, "kind": kind, "per_arm": out}


def read_mc_log(path: Path, replay: GradedReplay, log: GradedLog | None = None) -> MCLog | None:
    """:func:`mc_log` of the graded log at ``path`` (``log``: that file already read), for ``replay``
    (whose outcome table gives the questions, arms and costs): checked before anything is replayed (the
    splits need ≥ 4 questions)."""
    mc = mc_log(log if log is not None else read_graded_log(path), replay.table, str(path))
    if mc is not None and len(mc.questions) < 4:
        raise ConfigError(f"{path}: {len(mc.questions)} multiple-choice questions; the splits need ≥ 4")
    return mc


def replay_mc_sets(mc: MCLog, encoder: Encoder, alphas: Sequence[float], budget: float, splits: int,
                   seed: int, coke: CokeConfig, delta: float, source: str,
                   progress: Callable[[str], None] = lambda _: None, draw: tuple[int, int] | None = None,
                   kind: str = "lac") -> dict[str, Any]:
    """``eval pipeline --log``'s multiple-choice sets of ``mc`` (read from ``source``): the live path's
    coverage check over ``splits`` random halvings from ``seed`` — or, with ``draw = (fit, test)``, that
    many fit and test questions drawn per split (:func:`coverage_splits`) — (budget: ``budget`` × the most
    accurate paid arm's mean cost on each fit part × the test part, as ``--live``), the sets' score
    ``kind`` (``lac``/``aps``), and each arm's attainable figures at every α."""
    n = len(mc.questions)
    if draw is not None and (draw[0] < 4 or draw[1] < 1 or sum(draw) > n):
        raise ConfigError(f"{source}: {draw[0]} fit + {draw[1]} test questions per split do not fit in its "
                          f"{n} multiple-choice questions (≥ 4 fit, ≥ 1 test)")
    fit_n, test_n = (n // 2, n - n // 2) if draw is None else draw
    cfg = LiveMCConfig(fit_n, test_n, alphas=tuple(alphas), budget=budget, seed=seed, coke=coke, delta=delta,
                       set_kind=kind)
    how = "random halvings" if draw is None else f"random draws of {fit_n} fit + {test_n} test questions"
    progress(f"multiple-choice sets: {n} questions × {len(mc.arms)} arms, {splits} {how} …")
    with tempfile.TemporaryDirectory(prefix="kgwise-eval-pipeline-mc-") as tmp:
        report = coverage_splits(mc.questions, mc.arms, mc.answers, encoder, cfg, splits, Path(tmp), draw)
    return {"log": source, "left_out": len(mc.left_out), "left_out_ids": mc.left_out[:20],
            "answer_only": mc.answer_only,
            "budget_fraction": budget, "budget_of": "the most accurate paid arm on each fit half (as --live)",
            **report, "attainable": {f"{a:g}": attainable_sets(mc, a, cfg.set_kind) for a in alphas}}
