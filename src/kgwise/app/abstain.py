"""Abstention with a guarantee (``[answer_sets] abstain = true``): a multiple-choice answer is given only
when its confidence clears the threshold certified for the arm; otherwise the result says "not sure" and
keeps the set.

The confidence (:func:`answer_confidence`) is agreement first: the number of *witnesses* — the free arms
the pipeline asks before routing on every question (:func:`witnesses`) — that gave the same choice, plus
the probability the arm gave its choice (in [0, 1], so it orders answers with equal agreement). Any score
fixed before the calibration questions are seen keeps the guarantee; this one answers more where two arms
err rather independently: on WebQSP's recorded ReaRev answers (the other retriever's GNN as the witness;
300 tuning + 300 calibration questions, α = 0.2, 200 splits) the share answered goes from .355 / .275
(own score alone) to .535 / .495, accuracy among answered ≥ 0.8 on ≥ 96 % of the splits — the two GNNs
agree on 56 % of the questions and are then right on .87 (``kgwise eval abstain --splits 200``;
docs/answer-sets.md). Where a witness is no better than chance on the questions routed to an arm,
agreement first ranks worse than the probability alone, so each arm's rule takes whichever its tuning
answers predict to certify more (:class:`ArmRule`; .519 / .481 answered on those logs).

The rule is :class:`kgwise.conformal.selective.SelectiveRiskControl` per routed arm: its threshold grid and
test order come from the arm's answers on the dev questions the router learnt from, its certificate from
the held-out calibration questions the router, as it stands, sends to the arm (the same selection as the
sets, :mod:`kgwise.app.calibration`; all held-out questions the arm answered when the arm is forced).
Given the router's state those questions are i.i.d. draws of the questions routed to the arm, so

    P( accuracy among the questions routed to the arm that it answers ≥ 1 − α ) ≥ 1 − δ

over the calibration draw (Learn-then-Test, fixed sequence, binomial p-values). ``status`` reports, per arm,
the share of questions answered and the accuracy among those graded by feedback (:class:`AbstentionLog`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kgwise.app.config import reads_free
from kgwise.app.state import PENDING_KEPT
from kgwise.conformal.selective import (
    SelectiveConfig,
    SelectiveRiskControl,
    choose_confidence,
    questions_needed,
)
from kgwise.errors import DataError
from kgwise.files import read_json, write_text_atomic
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.app.calibration import HeldOutCalibration
    from kgwise.app.config import AnswerSetConfig, Context, PipelineConfig
    from kgwise.app.fit import LoggedCall

__all__ = ["NOT_SURE", "Abstention", "AbstentionLog", "ArmAbstention", "ArmRule", "answer_confidence",
           "answer_confidences", "arm_rule", "decide", "in_words", "probability_part", "witnesses"]

NOT_SURE = "not sure"
ALPHA_STEPS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
"""The α levels a "not sure" for want of questions tries, to name the smallest its arm certifies now."""
ABSTENTION_FILE = "abstention.json"


def witnesses(config: PipelineConfig, context: Context) -> tuple[str, ...]:
    """The arms whose answers every question has before routing (:meth:`kgwise.app.Pipeline.answer` asks
    them): the free arms, when ``[router] observe_free`` is on or the router's ``context`` reads them."""
    asked = config.router.observe_free or reads_free(context)
    return config.free_arms if asked else ()


def answer_confidence(probabilities: Mapping[str, float], prediction: str,
                      others: Mapping[str, str] | None = None, witnessed_by: Sequence[str] = ()) -> float:
    """Agreement first (module docstring): how many of the arms ``witnessed_by`` answered ``prediction``
    too in ``others`` (arm → its answer), plus the probability the arm gave its choice (its largest one
    when the answer has none)."""
    own = (float(probabilities[prediction]) if prediction in probabilities else
           float(max(probabilities.values(), default=0.0)))
    return sum((others or {}).get(w) == prediction for w in witnessed_by) + own


def answer_confidences(questions: Sequence[Question], names: Sequence[str],
                       calls: Mapping[tuple[str, str], LoggedCall], witnessed_by: Sequence[str] = ()
                       ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Per question and arm the confidence (:func:`answer_confidence`, an arm not witnessing itself) of
    its logged multiple-choice answer (NaN: no graded answer with probabilities) and whether it was
    correct."""
    conf = np.full((len(questions), len(names)), np.nan)
    ok = np.zeros((len(questions), len(names)), dtype=bool)
    for i, q in enumerate(questions):
        said = {w: c.answer for w in witnessed_by if (c := calls.get((w, q.id))) is not None}
        for a, name in enumerate(names):
            c = calls.get((name, q.id))
            if q.choices and c is not None and c.probabilities:
                conf[i, a] = answer_confidence(c.probabilities, c.answer, said,
                                               [w for w in witnessed_by if w != name])
                ok[i, a] = c.correct
    return conf, ok


@dataclass(frozen=True, slots=True)
class Abstention:
    """Whether this answer was withheld (``abstained``: the result says "not sure"), what an answer of
    this arm is promised or why none can be (``promise``), the answer's ``confidence`` and the certified
    ``threshold`` (``None``: nothing certified) and the held-out questions it rests on."""

    abstained: bool
    promise: str
    confidence: float
    threshold: float | None
    calibration_size: int


def probability_part(confidence: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The arm's own probability in an agreement-first confidence ``k + p`` (``p`` in (0, 1])."""
    c = np.asarray(confidence, dtype=np.float64)
    return np.asarray(c - np.maximum(np.ceil(c) - 1, 0), dtype=np.float64)


@dataclass(frozen=True)
class ArmRule:
    """An arm's certified rule (:class:`~kgwise.conformal.selective.SelectiveRiskControl`) and the score it
    orders answers by: agreement first (``agreement``; ``witnesses``: those counted) or the arm's
    probability alone — whichever its tuning answers predicted to answer more
    (:func:`~kgwise.conformal.selective.choose_confidence`): agreement helps where a witness errs apart from
    the arm, and costs where it is no better than chance on the questions routed to the arm."""

    rule: SelectiveRiskControl
    agreement: bool
    witnesses: tuple[str, ...]

    def score(self, confidence: float) -> float:
        """The rule's score of an agreement-first confidence."""
        return confidence if self.agreement else float(probability_part(confidence))

    def words(self, score: float, at_least: bool = True) -> str:
        """A score of this rule, or (``at_least``) its threshold, in words (:func:`in_words`)."""
        return in_words(score, self.witnesses if self.agreement else (), at_least)


def arm_rule(cal: HeldOutCalibration, arm: str, group: npt.NDArray[np.int64] | None, sets: AnswerSetConfig
             ) -> tuple[ArmRule | None, str]:
    """``arm``'s rule on the held-out questions ``group`` sends to it (all it answered when ``None``), or
    ``(None, the reason there is none)``: the calibration has no confidences, the arm answered none of the
    router's dev questions, or its routed questions are too few (how many it needs at its accuracy, and
    the smallest α of :data:`ALPHA_STEPS` they certify now)."""
    if not cal.can_abstain:
        return None, "the calibration holds no answer confidences (it predates abstention): run `kgwise fit`"
    assert cal.confidence is not None and cal.correct is not None
    assert cal.tune_confidence is not None and cal.tune_correct is not None
    a = cal.names.index(arm)
    tune = ~np.isnan(cal.tune_confidence[:, a])
    if not tune.any():
        return None, (f"arm {arm!r} answered none of the {len(cal.tune_confidence)} multiple-choice dev "
                      "questions the router learnt from, which order the thresholds to test")
    rows = ~np.isnan(cal.confidence[:, a])
    if group is not None:
        rows &= group == a
    tune_c, tune_ok = cal.tune_confidence[tune, a], cal.tune_correct[tune, a]
    cal_c, cal_ok = cal.confidence[rows, a], cal.correct[rows, a]
    n = int(rows.sum())
    seen = tuple(cal.witnesses_of(arm))

    def certified(alpha: float) -> ArmRule:
        config = SelectiveConfig(alpha=alpha, delta=sets.delta)
        agreement = bool(seen) and choose_confidence(
            {"probability": probability_part(tune_c), "agreement": tune_c}, tune_ok, n, config) == "agreement"
        chosen = ArmRule(SelectiveRiskControl(config), agreement, seen)
        score = tune_c if agreement else probability_part(tune_c)
        chosen.rule.fit(score, tune_ok).conformalize(cal_c if agreement else probability_part(cal_c), cal_ok)
        return chosen

    rule = certified(sets.alpha)
    if rule.rule.certified:
        return rule, ""
    accuracy = float(cal_ok.mean()) if n else float(tune_ok.mean())
    need = questions_needed(sets.alpha, sets.delta, accuracy)
    where = ("the held-out dev questions it answered (the arm is forced, so the router's choice does not "
             "select them)" if group is None else
             "the held-out dev questions the router, as it stands, sends to it")
    if need is None:
        more = (f"answering all, its accuracy {accuracy:.3f} is below {1 - sets.alpha:g}, so only its more "
                "confident answers could qualify, and these are too few")
    elif need > n:
        more = f"at its accuracy {accuracy:.3f} it needs about {need} ({need - n} more)"
    else:
        more = (f"at its accuracy {accuracy:.3f} about {need} would do, but on these the errors at every "
                "threshold tried keep the Clopper–Pearson bound above α")
    looser = next((x for x in ALPHA_STEPS if x > sets.alpha and certified(x).rule.certified), None)
    now = "" if looser is None else f"; α = {looser:g} is the smallest (in steps of 0.05) they certify now"
    return None, (f"arm {arm!r}: {n} of {where} certify no confidence threshold for accuracy ≥ "
                  f"{1 - sets.alpha:g} at δ = {sets.delta:g}; {more}{now}")


def decide(cal: HeldOutCalibration, arm: str, group: npt.NDArray[np.int64] | None, sets: AnswerSetConfig,
           probabilities: Mapping[str, float], prediction: str, others: Mapping[str, str] | None = None
           ) -> Abstention:
    """Answer or "not sure" for one multiple-choice answer of ``arm`` (see :func:`arm_rule`); ``others``:
    what the arms asked before routing answered, of which the calibration's witnesses count. The
    confidence reported is the score the arm's rule orders answers by."""
    confidence = answer_confidence(probabilities, prediction, others, cal.witnesses_of(arm))
    chosen, why = arm_rule(cal, arm, group, sets)
    if chosen is None:
        return Abstention(True, f"not sure: {why}", confidence, None, 0)
    rule, score = chosen.rule, chosen.score(confidence)
    assert rule.threshold_ is not None
    answered = bool(rule.predict([score])[0])
    promise = rule.promise(chosen.words(rule.threshold_))
    if not answered:
        promise = (f"not sure: {chosen.words(score, at_least=False)}, below arm {arm!r}'s certified "
                   f"threshold ({chosen.words(rule.threshold_)}); answers above it carry: {promise}")
    # the grid's last point, −∞ ("answer all"), is 0 for confidences that are ≥ 0 (and JSON can hold it)
    return Abstention(not answered, promise, score, max(rule.threshold_, 0.0), rule.calibration_size_)


def in_words(confidence: float, seen: Sequence[str], at_least: bool = True) -> str:
    """An agreement-first confidence (:func:`answer_confidence`) in words (with no witnesses ``seen``, the
    arm's probability). An answer's (``at_least=False``): ``1.31`` with witnesses ``kgm, gnn`` is "1 of
    kgm, gnn agrees with it and its probability is 0.31". A threshold's: "≥ 1 of kgm, gnn agree with it and
    its probability ≥ 0.31, or more agree" (more agreement clears it whatever the probability)."""
    if at_least and confidence <= 0:  # confidences are ≥ 0: answer all
        return "at any confidence"
    op = "≥" if at_least else "is"
    if not seen:
        return f"its probability {op} {confidence:.4g}"
    k = max(0, min(len(seen), math.ceil(confidence) - 1))  # the probability lies in (0, 1]
    who, p = ", ".join(seen), confidence - k
    if not at_least:
        return f"{k} of {who} agree{'s' if k == 1 else ''} with it and its probability is {p:.4g}"
    if k == 0:
        return f"its probability ≥ {p:.4g}, or ≥ 1 of {who} agrees with it"
    more = ", or more agree" if k < len(seen) else ""
    return f"≥ {k} of {who} agree{'s' if k == 1 else ''} with it and its probability ≥ {p:.4g}{more}"


@dataclass(frozen=True, slots=True)
class ArmAbstention:
    """Live, per arm: questions asked with abstention on, those answered, those of them graded by feedback
    and right; ``share_answered`` and ``accuracy_answered`` (``None`` before any)."""

    asked: int = 0
    answered: int = 0
    graded: int = 0
    correct: int = 0
    share_answered: float | None = None
    accuracy_answered: float | None = None

    @classmethod
    def of(cls, asked: int, answered: int, graded: int, correct: int) -> ArmAbstention:
        return cls(asked, answered, graded, correct, answered / asked if asked else None,
                   correct / graded if graded else None)


class AbstentionLog:
    """The live counts behind :class:`ArmAbstention`, in ``abstention.json`` of the state folder: per arm
    the four counts, and the answered decisions awaiting feedback (``pending``, at most the state's
    :data:`~kgwise.app.state.PENDING_KEPT`: feedback on an older decision is refused there anyway)."""

    def __init__(self, root: Path) -> None:
        self.path = root / ABSTENTION_FILE
        self.arms: dict[str, list[int]] = {}
        self.pending: dict[str, str] = {}
        if self.path.exists():
            body = read_json(self.path)
            try:
                self.arms = {str(k): [int(x) for x in v] for k, v in body["arms"].items()}
                self.pending = {str(k): str(v) for k, v in body["pending"].items()}
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise DataError(f"not a kgwise abstention log: {exc!r}", self.path) from exc

    def _save(self) -> None:
        write_text_atomic(self.path, json.dumps({"arms": self.arms, "pending": self.pending}))

    def record(self, decision: str, arm: str, abstained: bool) -> None:
        counts = self.arms.setdefault(arm, [0, 0, 0, 0])
        counts[0] += 1
        if not abstained:
            counts[1] += 1
            self.pending[decision] = arm
            while len(self.pending) > PENDING_KEPT:
                self.pending.pop(next(iter(self.pending)))
        self._save()

    def settle(self, decision: str, correct: bool) -> None:
        """Count the feedback of an answered decision (others are ignored)."""
        arm = self.pending.pop(decision, None)
        if arm is None:
            return
        counts = self.arms[arm]
        counts[2] += 1
        counts[3] += int(correct)
        self._save()

    def status(self, arm: str) -> ArmAbstention:
        return ArmAbstention.of(*self.arms.get(arm, [0, 0, 0, 0]))
