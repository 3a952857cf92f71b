"""A step of ``kgwise fit``: an inject arm's prompt bandit, learnt on the dev log.

An inject arm with ``combos`` answers every dev question with each of its combinations (the spend
estimate counts every call). KnowGPT's prompt bandit (§3.2, Eq. 5–8, :class:`kgwise.inject.PromptBandit`)
then learns from those outcomes with full feedback — each combination's correctness on each question,
Eq. 5's reward — and each arm's ridge weight λ^i is chosen by leave-one-out error.

Which bandit picks the combination whose answer stands for the arm on a dev question:

* a **held-out** (calibration) question: the bandit learnt on every learning question, which the arm then
  uses on new questions. So the held-out answers, and the set scores calibrated on them, are exactly what
  the arm will do next; the bandit never saw those questions;
* a **learning** question: a bandit learnt on the other of two interleaved folds (cross-fitting). The
  router then learns the arm's out-of-sample accuracy, not the optimism of a bandit scored on its own
  training questions.

The bandit needs :data:`MIN_PROMPT_FIT` learning questions answered with every combination. With fewer,
the arm keeps its first combination (``P_sub+F_s`` for ``"all"``), and the report says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kgwise.inject.bandit import BanditConfig, PromptBandit

__all__ = ["MIN_PROMPT_FIT", "PromptFit", "fit_prompts"]

MIN_PROMPT_FIT = 20
"""Learning questions with every combination's outcome that a prompt bandit needs (two folds of ≥ 10)."""


@dataclass(frozen=True, slots=True)
class PromptFit:
    """One inject arm's prompt fit: the combinations, the learning questions the bandit learnt from, each
    combination's accuracy on them, the accuracy of the cross-fitted picks on them; on the held-out
    questions answered with every combination, each combination's accuracy, the final bandit's and how
    often it picked each combination (out of sample: the bandit never saw them). ``reason``: why no
    bandit was learnt (empty when one was)."""

    arm: str
    combos: tuple[str, ...]
    questions: int
    accuracy: dict[str, float] = field(default_factory=dict)
    cross_fitted_accuracy: float | None = None
    held_out_questions: int = 0
    held_out_accuracy_each: dict[str, float] = field(default_factory=dict)
    held_out_accuracy: float | None = None
    held_out_share: dict[str, float] = field(default_factory=dict)
    ridges: dict[str, float] = field(default_factory=dict)
    reason: str = ""


def _learn(combos: Sequence[str], E: npt.NDArray[np.float64], R: npt.NDArray[np.float64], rows: Sequence[int],
           seed: int) -> PromptBandit:
    bandit = PromptBandit(E.shape[1], combos, BanditConfig(feedback="full", seed=seed))
    sub = E[list(rows)]
    bandit.fit(sub, lambda i, arm: float(R[rows[i], combos.index(arm)]))
    return bandit


def _pick(bandit: PromptBandit, e: npt.NDArray[np.float64], available: npt.NDArray[np.bool_]) -> int:
    scores = np.where(available, bandit.scores(e, explore=False), -np.inf)
    return int(np.argmax(scores))


def fit_prompts(arm: str, combos: Sequence[str], embeddings: npt.ArrayLike, rewards: npt.ArrayLike,
                held: Sequence[bool], seed: int = 0
                ) -> tuple[PromptBandit | None, list[int | None], PromptFit]:
    """The bandit of ``arm`` and, per question, the index in ``combos`` of the combination whose answer
    stands for the arm (``None``: no combination answered it): ``rewards[i, k]`` is 1/0 for combination
    ``k``'s correctness on question ``i`` (NaN: not asked or not graded); ``held[i]``: a held-out
    question. Without a bandit every question gets the first combination that answered it."""
    combos = list(combos)
    E = np.asarray(embeddings, dtype=np.float64)
    R = np.asarray(rewards, dtype=np.float64)
    answered = ~np.isnan(R)
    learn = [i for i in range(len(R)) if not held[i] and answered[i].all()]
    first = [int(np.argmax(row)) if row.any() else None for row in answered]
    if len(learn) < MIN_PROMPT_FIT:
        return None, first, PromptFit(arm, tuple(combos), len(learn), reason=(
            f"{len(learn)} learning questions answered with every combination, fewer than the "
            f"{MIN_PROMPT_FIT} a prompt bandit needs: the arm answers with {combos[0]}"))
    bandit = _learn(combos, E, R, learn, seed)
    folds = (learn[0::2], learn[1::2])
    picks: list[int | None] = list(first)
    for k, fold in enumerate(folds):
        other = _learn(combos, E, R, folds[1 - k], seed)
        for i in fold:
            picks[i] = _pick(other, E[i], answered[i])
    for i in range(len(R)):
        if held[i] and answered[i].any():
            picks[i] = _pick(bandit, E[i], answered[i])
    hold = [i for i in range(len(R)) if held[i] and answered[i].all()]

    def accuracy(rows: Sequence[int]) -> float | None:
        got = [R[i, p] for i in rows if (p := picks[i]) is not None]
        return float(np.mean(got)) if got else None

    shares = np.bincount([p for i in hold if (p := picks[i]) is not None], minlength=len(combos))
    report = PromptFit(
        arm, tuple(combos), len(learn), {c: float(np.mean(R[learn, k])) for k, c in enumerate(combos)},
        accuracy(learn), len(hold), {c: float(np.mean(R[hold, k])) for k, c in enumerate(combos) if hold},
        accuracy(hold),
        {c: float(shares[k] / max(1, len(hold))) for k, c in enumerate(combos)},
        {c: float(r) for c, r in zip(combos, bandit.ridges, strict=True) if math.isfinite(r)})
    return bandit, picks, report
