"""The pipeline's answer-set calibration: a held-out part of the dev log that the router never learns from,
re-selected by the router as it stands whenever a question is answered.

The promise is sets that cover the truth at rate ≥ 1 − α over the questions routed to each arm. The
router selects questions, and keeps learning, so scores pooled over all questions — or over the
questions some other router sent to the arm — do not give that. What does:

* :func:`kgwise.app.fit.fit` keeps ``calibration_share`` of the graded multiple-choice questions out of
  everything the router learns (its warm start and its settings); for each it stores the router context,
  every arm's cost bound and every arm's non-conformity score of the true choice
  (:class:`HeldOutCalibration`).
* When a question is routed, the same selection rule — the router in its present state, which depends
  only on questions other than these — is applied to each calibration question
  (:meth:`kgwise.route.coke.CokeRouter.would_pull`: its own cluster draws and cost bounds, the budget as
  it stands). The set of the routed arm ``a`` uses the scores of the calibration questions that the rule
  sends to ``a`` (:meth:`CalibrationSelector.group`).

Given the router's state, the calibration questions and the new one are i.i.d.; the selection rule is a
fixed (randomised) function of each question alone, so those it sends to ``a`` are i.i.d. draws from the
questions routed to ``a``, and split conformal on them covers a question routed to ``a`` with probability
≥ 1 − α (marginal), or has coverage ≥ 1 − α over questions routed to ``a`` with probability ≥ 1 − δ over
the calibration questions (``guarantee = "pac"``; ``"pac_all_arms"``: δ/K for each of K arms, so that by
the union bound every arm's coverage is ≥ 1 − α at once with probability ≥ 1 − δ).

When the questions the rule sends to ``a`` are too few for a finite threshold (a newcomer's dev log:
``pac`` at α = 0.2, δ = 0.05 needs 14), the set is calibrated on every held-out question the arm answered
or, with ``[answer_sets] fallback = "all_dev"``, on *every graded dev question it answered*
(:meth:`HeldOutCalibration.dev_scores`) — the held-out ones and those the router learnt from
(:func:`fallback_scores`). An arm's score of a question is a fixed function of that question alone (its
model, prompt and scoring do not change with the dev log; an inject arm whose prompt bandit the fit
learns on the dev log is the exception and contributes its held-out questions only), so the dev
questions and a new one are exchangeable *for that arm's score*, whatever the router learnt from them.
Either way the guarantee is over questions like the dev log answered by ``a``, not conditional on the
router's choice (:func:`pooled_statement`). Twice the scores move a PAC set off the largest one at a
newcomer's size (at α = 0.2, δ = 0.05 the rank is the largest score for n ≤ 21, the 2nd largest at 25,
the 3rd at 30, the 6th at 50: :func:`kgwise.conformal.split.pac_rank`), so the sets are smaller — and,
on the questions the router does send the arm, which may be harder, their coverage is nearer 1 − α or
below: ``held_out`` stays the default (``docs/answer-sets.md`` gives both, measured).

``[answer_sets] calibrate_on = "arm"`` takes those questions — every graded dev question the arm answered
— for *every* set of the arm, not only when the routed ones are too few (:func:`arm_set`), and splits the
ties of a score by a seeded coin: each calibration question's score and each new question's scores are
moved by ``TIE_EPSILON × u``, ``u`` uniform from a hash of the fit's random id with the row (a calibration
question) or the question's text (a new one), and the arm's most probable choice is always in the set.
Split conformal holds for any score, and the moved score is one fixed function of the question and a coin
drawn apart from the data, so the PAC rank of :func:`kgwise.conformal.split.pac_rank` keeps its promise:
coverage ≥ 1 − α for a question like the dev log answered by that arm, with probability ≥ 1 − δ over the
dev log and the coins (adding the top choice only raises coverage) — per arm, not conditional on the
router's choice. Why the coin: an arm that gives only an answer has LAC score 0 (right) or 1 (wrong), so
without it one wrong answer too many among the calibration questions turns *every* set into every choice;
with it the PAC rank falls among the wrong answers' coins, and a share of the sets — about the share of
wrong answers beyond what the rank allows — is every choice, the rest the answer alone (the randomised
smoothing of Vovk, Gammerman and Shafer 2005, "Algorithmic Learning in a Random World", derandomised
by the hash). Two approximations
remain and are stated: under ``pacing = "price"`` a pull sets the price η with the question's own values
in its window, the replay uses the last η; and the guarantee holds for the rule in force at each
question, the live coverage (``kgwise status``) checks it on what feedback reveals.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.app.config import AnswerSetConfig, PipelineConfig
from kgwise.arrays import decode_array, encode_array
from kgwise.bandit.linucb import TrackedContexts
from kgwise.conformal.ltt import min_calibration_questions
from kgwise.conformal.scores import choice_score
from kgwise.conformal.split import conformal_quantile, min_calibration_size, pac_conformal_quantile, pac_rank
from kgwise.errors import DataError
from kgwise.files import read_json, short_hash, write_text_atomic
from kgwise.route.coke import CokeRouter

__all__ = ["CALIBRATION_KIND", "TIE_EPSILON", "ArmSet", "CalibrationSelector", "HeldOutCalibration",
           "arm_delta", "arm_rule_scores", "arm_set", "calibrated_threshold", "choice_set",
           "fallback_noun", "fallback_scores", "fallback_words", "guarantee_clause", "made_with",
           "needs_lines", "nonconformity", "pooled_statement", "questions_needed", "smallest_alpha",
           "stale", "tie_coin", "too_few"]

CALIBRATION_KIND = "kgwise.HeldOutCalibration"
CALIBRATION_VERSION = 1


def made_with(config: PipelineConfig) -> dict[str, str]:
    """What a calibration's scores and cost bounds depend on, hashed per part: every arm's settings (its
    model, prompt and price: the bounds replay the router), the KG (a file by its name and size, not its
    folder: replicas that share one state read their own copy), and the score kind."""
    kg = config.kg
    files = {k: (p.name, p.stat().st_size if p.is_file() else None) for k in ("graph", "source", "index")
             if (p := getattr(kg, k)) is not None}
    return {"arms": short_hash([a.fingerprint() for a in config.arms]),
            "kg": short_hash({"files": files, "format": kg.format, "sparql": kg.sparql}),
            "kind": config.answer_sets.kind}


def stale(calibration: HeldOutCalibration, config: PipelineConfig, path: Path) -> str | None:
    """Why ``calibration`` (read from ``path``) does not fit ``config``: made with other arms, another KG,
    another score kind, or (with ``[answer_sets] abstain``) confidences that counted the agreement of an arm
    the pipeline no longer asks before routing (``None``: it fits, or it predates this record)."""
    made = calibration.meta.get("made_with")
    if not isinstance(made, dict):
        return None
    now = made_with(config)
    what = {"arms": "other arm settings (model, prompt or price)",
            "kg": f"another KG than [kg] of {config.path}",
            "kind": f"score kind {made.get('kind')!r}, not [answer_sets] kind = {now['kind']!r}"}
    differ = [what[k] for k in now if made.get(k) != now[k]]
    if config.answer_sets.abstain and calibration.can_abstain:
        from kgwise.app.abstain import witnesses

        # a live confidence counts the calibration's witnesses only: one no longer asked would shift it
        gone = [w for w in calibration.witnesses
                if w not in witnesses(config, calibration.meta.get("context", config.router.context))]
        if gone:
            differ.append(f"abstention's confidences counting the agreement of {', '.join(gone)}, which "
                          "the pipeline no longer asks before routing")
    if not differ:
        return None
    return f"{path} was made with {' and '.join(differ)}: run `kgwise fit` again"


def nonconformity(kind: str, probabilities: Mapping[str, float], labels: Sequence[str]
                  ) -> npt.NDArray[np.float64]:
    """Each choice's non-conformity score ``kind`` (LAC, APS …: :func:`kgwise.conformal.scores.choice_score`)
    from an answer's probabilities over the choice labels (a label without one: 0)."""
    p = np.asarray([[probabilities.get(lab, 0.0) for lab in labels]])
    return np.asarray(choice_score(kind)(p)[0])


def calibrated_threshold(scores: Sequence[float], sets: AnswerSetConfig, arms: int = 1) -> float:
    """An arm's set threshold on the non-conformity score: the split-conformal quantile (Eq. 1) or, with
    ``guarantee = "pac"``, the training-conditional one (:func:`kgwise.conformal.split.pac_rank`) at δ, with
    ``"pac_all_arms"`` at δ / ``arms`` (the pipeline's arm count); ``+∞`` when the calibration is too
    small (every choice)."""
    if not scores:
        return math.inf
    if sets.guarantee != "marginal":
        return pac_conformal_quantile(scores, sets.alpha, arm_delta(sets, arms))
    if len(scores) < min_calibration_size(sets.alpha):
        return math.inf
    return conformal_quantile(scores, sets.alpha)


def questions_needed(sets: AnswerSetConfig, arms: int, alpha: float | None = None) -> int:
    """The fewest calibration questions whose threshold is finite under ``sets``' guarantee at ``alpha``
    (default ``sets.alpha``): ``⌈1/α − 1⌉`` for split conformal, the smallest ``n`` with
    :func:`~kgwise.conformal.split.pac_rank` ``≤ n`` for the PAC ones (α = 0.2, δ = 0.05: 14)."""
    a = sets.alpha if alpha is None else alpha
    if sets.guarantee == "marginal":
        return min_calibration_size(a)
    d = arm_delta(sets, arms)
    n = min_calibration_questions(a, d)  # even rank n needs (1 − α)^n ≤ δ
    while pac_rank(n, a, d) > n:
        n += 1
    return n


ALPHA_GRID = tuple(round(0.01 * i, 2) for i in range(1, 51))
"""The α values :func:`smallest_alpha` tries."""


def smallest_alpha(n: int, sets: AnswerSetConfig, arms: int) -> float | None:
    """The smallest α of :data:`ALPHA_GRID` whose threshold ``n`` calibration questions make finite
    (``None``: none up to 0.5)."""
    return next((a for a in ALPHA_GRID if n >= questions_needed(sets, arms, a)), None)


def too_few(n: int, sets: AnswerSetConfig, arms: int, where: str) -> str:
    """Why ``n`` calibration questions (``where``: which ones) give no set at ``sets.alpha``: how many the
    guarantee needs, how many more, and the smallest α they certify now."""
    need = questions_needed(sets, arms)
    now = smallest_alpha(n, sets, arms)
    level = "" if sets.guarantee == "marginal" else f", δ = {arm_delta(sets, arms):g}"
    return (f"{n} {where} are too few for a {sets.guarantee} set at α = {sets.alpha:g}{level}: it needs "
            f"{need} ({need - n} more)"
            + (f"; α = {now:g} is the smallest these certify" if now is not None else ""))


def needs_lines(cal: HeldOutCalibration, group: npt.NDArray[np.int64], sets: AnswerSetConfig) -> list[str]:
    """For ``kgwise fit``, per arm: what its held-out questions certify at ``sets.alpha`` — those the
    router sends it (``group``) and all it answered (the fallback, :func:`fallback_scores`) — how many each
    kind of set needs, the smallest α each certifies now, and with ``[answer_sets] abstain`` the rule it
    certifies (:func:`kgwise.app.abstain.arm_rule`) or why none."""
    from kgwise.app.abstain import arm_rule

    arms = len(cal.names)

    def now(n: int) -> str:
        a = smallest_alpha(n, sets, arms)
        return "none up to 0.5" if a is None else f"{a:g}"

    need = ", ".join(f"{g} {questions_needed(replace(sets, guarantee=g), arms)}"
                     for g in ("marginal", "pac", "pac_all_arms"))
    out = []
    by_arm = sets.calibrate_on == "arm"
    needed = questions_needed(sets, arms)
    for name in cal.names:
        routed = cal.arm_scores(name, group).size
        everyone = (cal.dev_scores(name) if by_arm else fallback_scores(cal, name, sets)).size
        noun = "graded dev" if by_arm else fallback_noun(sets)
        line = (f"{name}: {routed} held-out questions routed here, {everyone} {noun} "
                f"questions answered in all; at α = {sets.alpha:g} a set needs {need}; smallest α for the "
                f"{sets.guarantee} set now: " + (
                    f"{now(everyone)} (calibrate_on = arm: every set from all it answered"
                    + (f", {needed - everyone} more needed)" if everyone < needed else ")")
                    if by_arm else f"{now(routed)} routed, {now(everyone)} over all it answered"))
        if not by_arm and routed < needed:
            line += (f"; too few routed: calibrate_on = \"arm\" would calibrate every set on the "
                     f"{cal.dev_scores(name).size} graded dev questions it answered (per arm, not "
                     "conditional on routing)")
        if sets.abstain:
            chosen, why = arm_rule(cal, name, group, sets)
            r = None if chosen is None else chosen.rule
            if chosen is None or r is None or r.threshold_ is None:
                line += "; abstention: " + why
            else:
                line += (f"; abstention: answers ({chosen.words(r.threshold_)}) — {r.answered_share_:.0%} of "
                         f"its routed held-out questions, right on {r.accuracy_:.3f} of them")
        out.append(line)
    return out


def fallback_scores(cal: HeldOutCalibration, arm: str, sets: AnswerSetConfig) -> npt.NDArray[np.float64]:
    """The scores an arm's set falls back to when the routed held-out questions are too few (and a forced
    arm's): all held-out questions it answered, or with ``fallback = "all_dev"`` all graded dev questions
    it answered (module docstring)."""
    return cal.dev_scores(arm) if sets.fallback == "all_dev" else cal.arm_scores(arm)


def fallback_noun(sets: AnswerSetConfig) -> str:
    """The questions :func:`fallback_scores` takes, in a message: ``graded dev`` or ``held-out dev``."""
    return "graded dev" if sets.fallback == "all_dev" else "held-out dev"


def fallback_words(sets: AnswerSetConfig) -> str:
    """Which questions :func:`fallback_scores` takes, for a statement."""
    return f"{fallback_noun(sets)} questions it answered, " + (
        "held out or not: its score does not depend on what the router learnt" if sets.fallback == "all_dev"
        else "which the router never learnt from")


def pooled_statement(arm: str, n: int, routed: int, sets: AnswerSetConfig, arms: int) -> str:
    """The guarantee of an arm's set calibrated on the ``n`` questions of :func:`fallback_scores` because
    the ``routed`` held-out ones the router sends it are too few: over questions like the dev log, not over
    those the router picks for the arm."""
    return (f"P(truth ∈ set) ≥ {1 - sets.alpha:g} for a question like the dev log answered by arm {arm!r} "
            f"(split conformal on all {n} {fallback_words(sets)}; {guarantee_clause(sets, arms)}) — not "
            "conditional on the router's choice, so questions "
            "it sends this arm may be harder: "
            + too_few(routed, sets, arms, "held-out questions it sends there now"))


TIE_EPSILON = 1e-9
"""How far a coin moves a score under ``calibrate_on = "arm"``: below any difference of two probabilities
that matters, so it orders ties only."""


def tie_coin(*parts: str) -> float:
    """A uniform draw in [0, 1) from the blake2b hash of ``parts`` (with the fit's random id among them,
    independent of the data and across distinct parts)."""
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def arm_rule_scores(cal: HeldOutCalibration, arm: str) -> npt.NDArray[np.float64]:
    """``arm``'s scores on every graded dev question it answered (:meth:`HeldOutCalibration.dev_scores`'s
    questions), each moved by its coin (module docstring): what ``calibrate_on = "arm"`` calibrates on;
    computed once per calibration and arm."""
    if arm not in cal._rule_scores:
        fit, a = str(cal.meta.get("fit", "")), cal.names.index(arm)
        columns = [("held", cal.scores[:, a])]
        if cal.tune_scores is not None:
            columns.append(("tune", cal.tune_scores[:, a]))
        coins = [tie_coin(fit, arm, part, str(i)) for part, column in columns
                 for i in np.flatnonzero(~np.isnan(column)).tolist()]  # dev_scores' rows, in its order
        cal._rule_scores[arm] = cal.dev_scores(arm) + TIE_EPSILON * np.asarray(coins, dtype=np.float64)
    return cal._rule_scores[arm]


@dataclass(frozen=True)
class ArmSet:
    """An answer's set under ``calibrate_on = "arm"``: its ``labels``, the (coin-moved) calibration
    ``scores`` it was made from, whether their threshold is finite (``finite``: false when the scores are
    too few and the set is every choice, which covers the truth trivially) and the ``statement`` of its
    guarantee."""

    labels: tuple[str, ...]
    scores: npt.NDArray[np.float64]
    finite: bool
    statement: str


def arm_set(cal: HeldOutCalibration, arm: str, probabilities: Mapping[str, float], labels: Sequence[str],
            text: str, sets: AnswerSetConfig, arms: int) -> ArmSet:
    """The set of ``arm``'s answer (``probabilities`` over ``labels``) to the question ``text`` under
    ``calibrate_on = "arm"`` (module docstring): the choices whose coin-moved score is within the threshold
    of :func:`arm_rule_scores`, and the arm's most
    probable choice; every choice when the scores are too few for ``sets``' guarantee, saying how many
    more it needs."""
    scores = arm_rule_scores(cal, arm)
    threshold = calibrated_threshold(scores.tolist(), sets, arms)
    where = f"graded dev questions arm {arm!r} answered"
    if math.isinf(threshold):
        return ArmSet(tuple(labels), scores, False,
                      f"every choice: {too_few(len(scores), sets, arms, where)}; the set covers the truth "
                      "trivially")
    moved = (nonconformity(cal.kind, probabilities, labels)
             + TIE_EPSILON * tie_coin(str(cal.meta.get("fit", "")), arm, "question", text))
    top = int(np.argmax([probabilities.get(lab, 0.0) for lab in labels]))
    chosen = tuple(lab for i, (lab, s) in enumerate(zip(labels, moved.tolist(), strict=True))
                   if s <= threshold or i == top)
    return ArmSet(chosen, scores, True, (
        f"P(truth ∈ set) ≥ {1 - sets.alpha:g} for a question like the dev log answered by arm {arm!r} "
        f"(split conformal on all {len(scores)} {fallback_words(replace(sets, fallback='all_dev'))}, ties "
        f"split by a seeded coin; {guarantee_clause(sets, arms)}) — per arm, not conditional on the router's "
        "choice, so questions it sends this arm may be harder"))


def arm_delta(sets: AnswerSetConfig, arms: int) -> float:
    """The confidence level one arm's PAC calibration runs at: δ, or δ / ``arms`` for ``pac_all_arms``."""
    if arms < 1:
        raise ValueError(f"arms must be ≥ 1, got {arms}")
    return sets.delta / arms if sets.guarantee == "pac_all_arms" else sets.delta


def guarantee_clause(sets: AnswerSetConfig, arms: int) -> str:
    """How the set's coverage holds over the calibration draw, for a statement: on average (marginal),
    with probability ≥ 1 − δ (pac), or for every arm at once (pac_all_arms)."""
    if sets.guarantee == "marginal":
        return "on average over them"
    joint = f" for every arm at once (δ/{arms} per arm)" if sets.guarantee == "pac_all_arms" else ""
    return f"with probability ≥ {1 - sets.delta:g} over them{joint}, training-conditional"


def choice_set(probabilities: Mapping[str, float], labels: Sequence[str], kind: str, threshold: float
               ) -> tuple[str, ...]:
    """The labels whose non-conformity score is at most ``threshold``: the set (every label at ``+∞``)."""
    scores = nonconformity(kind, probabilities, labels)
    return tuple(lab for lab, s in zip(labels, scores.tolist(), strict=True) if s <= threshold)


@dataclass(frozen=True, eq=False)
class HeldOutCalibration:
    """The held-out calibration questions (see the module docstring): per question (rows) its router
    ``contexts``, and per arm (columns, in the order of ``names``) its cost ``bounds`` and the
    non-conformity ``scores`` (``kind``: ``lac``/``aps``) of the true choice — NaN where the arm gave no
    graded answer. ``meta``: what the fit says about them (questions, α, the context). For abstention
    (:mod:`kgwise.app.abstain`): per held-out question and arm the ``confidence`` of its answer (the
    probability of the choice it gave; NaN: no graded answer) and whether it was ``correct``, and the same
    on the dev questions the router learnt from (``tune_confidence``, ``tune_correct``), which order the
    thresholds Learn-then-Test tries; ``None`` in calibrations written before abstention existed. The
    confidences count agreement with the ``witnesses`` (:func:`kgwise.app.abstain.witnesses`; none in
    calibrations written before agreement counted), which a live answer's confidence counts too.
    ``tune_scores``: per dev question the router learnt from and per arm, the score of the true choice,
    NaN where the arm gave no graded answer *or where its answer depends on the dev log* (an inject arm
    whose prompt bandit the fit learns on it); ``None`` in calibrations written before they were kept."""

    names: tuple[str, ...]
    kind: str
    contexts: npt.NDArray[np.float64]
    bounds: npt.NDArray[np.float64]
    scores: npt.NDArray[np.float64]
    meta: dict[str, Any] = field(default_factory=dict)
    confidence: npt.NDArray[np.float64] | None = None
    correct: npt.NDArray[np.bool_] | None = None
    tune_confidence: npt.NDArray[np.float64] | None = None
    tune_correct: npt.NDArray[np.bool_] | None = None
    witnesses: tuple[str, ...] = ()
    tune_scores: npt.NDArray[np.float64] | None = None
    _rule_scores: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict, init=False, repr=False,
                                                            compare=False)

    def __post_init__(self) -> None:
        n, k = len(self.contexts), len(self.names)
        if self.bounds.shape != (n, k) or self.scores.shape != (n, k) or self.contexts.ndim != 2:
            raise DataError(f"calibration arrays disagree: {self.contexts.shape} contexts, bounds "
                            f"{self.bounds.shape}, scores {self.scores.shape} for {k} arms")
        m = None if self.tune_confidence is None else len(self.tune_confidence)
        t = None if self.tune_scores is None else len(self.tune_scores)
        for name, rows in (("confidence", n), ("correct", n), ("tune_confidence", m), ("tune_correct", m),
                           ("tune_scores", t)):
            value = getattr(self, name)
            if value is not None and value.shape != (rows, k):
                raise DataError(f"calibration arrays disagree: {name} {value.shape} for {rows} questions "
                                f"and {k} arms")
        if (self.confidence is None) != (self.correct is None) or (
                self.tune_confidence is None) != (self.tune_correct is None):
            raise DataError("calibration arrays disagree: confidences without correctness flags or back")

    def witnesses_of(self, arm: str) -> list[str]:
        """The witnesses whose agreement counts in ``arm``'s confidence (an arm does not witness itself)."""
        return [w for w in self.witnesses if w != arm]

    @property
    def can_abstain(self) -> bool:
        """Whether the fit stored what abstention needs (confidences and correctness)."""
        return self.confidence is not None and self.tune_confidence is not None

    def __len__(self) -> int:
        return len(self.contexts)

    @property
    def scored(self) -> int:
        """How many calibration questions some arm has a score on (the multiple-choice ones answered)."""
        return int(np.isfinite(self.scores).any(axis=1).sum())

    def size(self, arm: str) -> int:
        """How many calibration questions ``arm`` answered."""
        return int(np.isfinite(self.scores[:, self.names.index(arm)]).sum()) if arm in self.names else 0

    def arm_scores(self, arm: str, group: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
        """``arm``'s scores on the calibration questions ``group`` (:meth:`CalibrationSelector.group`)
        sends to it — on all of them without a group — leaving out those it did not answer."""
        a = self.names.index(arm)
        column = self.scores[:, a] if group is None else self.scores[group == a, a]
        return column[~np.isnan(column)]

    def dev_scores(self, arm: str) -> npt.NDArray[np.float64]:
        """``arm``'s scores on every graded dev question it answered whose score the dev log does not
        shape: the held-out ones and, where the fit stored them (:attr:`tune_scores`), those the router
        learnt from. What a set calibrated on all questions the arm answered uses (module docstring)."""
        held = self.arm_scores(arm)
        if self.tune_scores is None:
            return held
        column = self.tune_scores[:, self.names.index(arm)]
        return np.concatenate([held, column[~np.isnan(column)]])

    def save(self, path: Path) -> None:
        body = {"kind": CALIBRATION_KIND, "version": CALIBRATION_VERSION, "names": list(self.names),
                "score": self.kind,
                "contexts": encode_array(self.contexts), "bounds": encode_array(self.bounds),
                "scores": encode_array(self.scores), "shape": [len(self), len(self.names),
                                                               self.contexts.shape[1]],
                "meta": self.meta}
        if self.tune_scores is not None:
            body["tune_scores"] = {"values": encode_array(self.tune_scores),
                                   "questions": len(self.tune_scores)}
        if self.can_abstain:
            assert self.confidence is not None and self.correct is not None
            assert self.tune_confidence is not None and self.tune_correct is not None
            body["abstain"] = {"confidence": encode_array(self.confidence),
                               "correct": encode_array(self.correct.astype(np.float64)),
                               "tune_confidence": encode_array(self.tune_confidence),
                               "tune_correct": encode_array(self.tune_correct.astype(np.float64)),
                               "tune_questions": len(self.tune_confidence),
                               "witnesses": list(self.witnesses)}
        write_text_atomic(path, json.dumps(body))

    @classmethod
    def load(cls, path: Path) -> HeldOutCalibration:
        """Read a calibration written by :meth:`save`; ``DataError`` naming the file otherwise (a file of
        the per-arm format older kgwise versions wrote asks for ``kgwise fit`` again)."""
        body = read_json(path)
        kind = body.get("kind") if isinstance(body, dict) else None
        if kind != CALIBRATION_KIND:
            raise DataError(f"not a kgwise calibration (kind {kind!r}; calibrations made before the held-out "
                            "split cannot be re-selected: run `kgwise fit` again)", path)
        version = body.get("version", 1)
        if version != CALIBRATION_VERSION:
            raise DataError(f"calibration version {version!r} is not one this kgwise reads "
                            f"({CALIBRATION_VERSION}): run `kgwise fit` again", path)
        try:
            n, k, d = (int(v) for v in body["shape"])
            extra: dict[str, Any] = {}
            if (ab := body.get("abstain")) is not None:
                m = int(ab["tune_questions"])
                extra = {"confidence": decode_array(ab["confidence"]).reshape(n, k),
                         "correct": decode_array(ab["correct"]).reshape(n, k) > 0.5,
                         "tune_confidence": decode_array(ab["tune_confidence"]).reshape(m, k),
                         "tune_correct": decode_array(ab["tune_correct"]).reshape(m, k) > 0.5,
                         "witnesses": tuple(str(w) for w in ab.get("witnesses", ()))}
            if (ts := body.get("tune_scores")) is not None:
                extra["tune_scores"] = decode_array(ts["values"]).reshape(int(ts["questions"]), k)
            return cls(tuple(str(x) for x in body["names"]), str(body["score"]),
                       decode_array(body["contexts"]).reshape(n, d),
                       decode_array(body["bounds"]).reshape(n, k),
                       decode_array(body["scores"]).reshape(n, k), dict(body.get("meta", {})), **extra)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a kgwise calibration: {exc!r}", path) from exc


class CalibrationSelector:
    """Applies a router's selection rule to the calibration questions (:meth:`group`); keeps their
    contexts tracked by the router's LinUCB so that doing so costs O(n·arms) per question and O(n·d) per
    router update, not O(n·d²)."""

    def __init__(self, calibration: HeldOutCalibration) -> None:
        self.calibration = calibration
        self._router: CokeRouter | None = None
        self._tracked: TrackedContexts | None = None

    def _track(self, router: CokeRouter) -> TrackedContexts | None:
        if router is not self._router:
            if self._router is not None and self._tracked is not None:
                self._router.linucb.untrack(self._tracked)
            self._router = router
            use = router.config.use_context
            self._tracked = router.linucb.track(self.calibration.contexts) if use else None
        return self._tracked

    def release(self) -> None:
        """Stop tracking (the router is replaced or the pipeline closes)."""
        if self._router is not None and self._tracked is not None:
            self._router.linucb.untrack(self._tracked)
        self._router = self._tracked = None

    def group(self, router: CokeRouter, seed: str) -> npt.NDArray[np.int64]:
        """Per calibration question, the position of the arm ``router`` would send it to now (−1: none),
        with draws seeded by ``seed`` (e.g. the decision id: the set of a decision can be recomputed).
        Call under the lock that guards ``router``, before the routed question's own pull."""
        cal = self.calibration
        if router.names != list(cal.names) or (router.config.use_context
                                               and cal.contexts.shape[1] != router.dim):
            raise DataError(f"the calibration was made for arms {list(cal.names)} with "
                            f"{cal.contexts.shape[1]}-d contexts, the router has {router.names} with "
                            f"{router.dim}-d: run `kgwise fit` again")
        # as live, an arm is available where it can answer; a missing score is dropped from the arm's group
        # by :meth:`scores`, it does not keep the arm from being chosen
        available = cal.bounds <= router.budget
        rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(),
                                                   "little"))
        return router.would_pull(self._track(router), np.where(available, cal.bounds, 0.0), available, rng)
