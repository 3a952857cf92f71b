"""Selective prediction with a PAC guarantee: answer only when the confidence clears a threshold certified
so that the accuracy among the answered questions is ≥ 1 − α with probability ≥ 1 − δ over the calibration
draw (Learn-then-Test, Angelopoulos et al. 2021, applied to the selective risk as in their Sec. 5.3 and
Geifman & El-Yaniv 2017's "selection with guaranteed risk").

The confidence is any score fixed before the calibration questions are seen (the pipeline's counts the
agreement of free arms first, :mod:`kgwise.app.abstain`); how well it ranks right above wrong answers
decides how much is answered, not whether the guarantee holds. For a threshold ``t`` the selective risk is
``R(t) = P(wrong | confidence ≥ t)``. Given the number
``n_t`` of calibration questions with confidence ≥ ``t``, those questions are i.i.d. draws from the
questions answered at ``t``, so their error count is ``Binom(n_t, R(t))`` and

    p_t = P(Binom(n_t, α) ≤ k_t)            (k_t: errors among them; p_t = 1 when n_t = 0)

is a valid p-value for ``H0_t: R(t) > α`` (Theorem 2 of LTT, conditional on ``n_t``; equivalently, the
one-sided Clopper–Pearson upper bound of ``R(t)`` at ``1 − δ`` is ≤ α iff ``p_t ≤ δ``). The thresholds form
a fixed sequence (FWER ≤ δ, testing each at δ until the first acceptance), ordered with data the
calibration questions never touch: :meth:`SelectiveRiskControl.fit` takes *tuning* questions (e.g. the dev
questions the router learnt from) and sets the grid to their confidence quantiles; the sequence starts at
the grid point whose test the tuning data predict to pass most surely for a calibration of ``n`` questions
(only ``n``, not the calibration's confidences or labels, enters), and moves towards lower thresholds
(more questions answered). The certified threshold ``t̂`` is the lowest one rejected; without any the
estimator abstains on everything. Then ``P(R(t̂) ≤ α) ≥ 1 − δ``.

MAPIE-style use::

    rule = SelectiveRiskControl(SelectiveConfig(alpha=0.2)).fit(tune_conf, tune_ok)
    rule.conformalize(cal_conf, cal_ok)
    answered = rule.predict(test_conf)          # True: answer; False: "not sure"
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from kgwise.conformal.ltt import calibration_questions_needed, control_fwer
from kgwise.errors import ConfigError

__all__ = ["SelectiveConfig", "SelectiveRiskControl", "choose_confidence", "questions_needed",
           "selective_p_values"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class SelectiveConfig:
    """``alpha``: the largest error rate allowed among the answered questions; ``delta``: the probability,
    over the calibration draw, that the certified threshold's error rate exceeds ``alpha``; ``levels``: how
    many confidence quantiles of the tuning questions form the threshold grid (plus "answer all"). 40
    (steps of 2.5 % in the share answered) rather than 20: the fixed sequence tests each at δ, so finer
    steps cost no level and let it stop nearer the share the calibration certifies (WebQSP's ReaRev logs
    at α = 0.2, 200 splits, ``kgwise eval abstain --splits 200``: answered .531 / .505 against .519 / .481
    with 20, accuracy among answered ≥ 0.8 on .950 / .975 of the splits)."""

    alpha: float = 0.2
    delta: float = 0.05
    levels: int = 40

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"alpha must lie in (0, 1), got {self.alpha}")
        if not 0.0 < self.delta < 1.0:
            raise ConfigError(f"delta must lie in (0, 1), got {self.delta}")
        if self.levels < 1:
            raise ConfigError(f"levels must be ≥ 1, got {self.levels}")


def _checked(confidence: npt.ArrayLike, correct: npt.ArrayLike, what: str) -> tuple[FloatArray, BoolArray]:
    c = np.asarray(confidence, dtype=np.float64).ravel()
    ok = np.asarray(correct, dtype=bool).ravel()
    if c.size != ok.size:
        raise ConfigError(f"{what}: {c.size} confidences for {ok.size} correctness flags")
    if np.isnan(c).any():
        raise ConfigError(f"{what}: a confidence is NaN")
    return c, ok


def selective_p_values(answered: npt.ArrayLike, errors: npt.ArrayLike, alpha: float) -> FloatArray:
    """Per threshold, ``P(Binom(n_t, α) ≤ k_t)`` from ``answered`` counts ``n_t`` and ``errors`` ``k_t``
    (1 where nothing is answered)."""
    n = np.asarray(answered, dtype=np.int64)
    k = np.asarray(errors, dtype=np.int64)
    if (k < 0).any() or (k > n).any():
        raise ConfigError("error counts must lie in 0..answered")
    return np.where(n > 0, binom.cdf(k, np.maximum(n, 1), alpha), 1.0).astype(np.float64)


class SelectiveRiskControl:
    """The estimator (module docstring): ``fit`` on tuning questions → ``conformalize`` on calibration
    questions → ``predict``. After ``conformalize``: ``threshold_`` (``None``: nothing certified, every
    question gets "not sure"), ``p_values_`` and ``order_`` (grid indices in test order), and on the
    calibration questions ``answered_share_`` and ``accuracy_`` at ``threshold_``."""

    def __init__(self, config: SelectiveConfig | None = None) -> None:
        self.config = config or SelectiveConfig()
        self.grid_: FloatArray | None = None  # thresholds, descending; the last is −∞ (answer all)
        self.tune_share_: FloatArray | None = None
        self.tune_risk_: FloatArray | None = None
        self.order_: npt.NDArray[np.int64] | None = None
        self.p_values_: FloatArray | None = None
        self.threshold_: float | None = None
        self.calibration_size_: int = 0
        self.answered_share_: float | None = None
        self.accuracy_: float | None = None

    def fit(self, confidence: npt.ArrayLike, correct: npt.ArrayLike) -> SelectiveRiskControl:
        """The threshold grid (the tuning confidences' quantiles at answer shares ``1/levels … 1``) and,
        per grid point, the tuning questions' answered share and error rate among those answered."""
        c, ok = _checked(confidence, correct, "SelectiveRiskControl.fit")
        if c.size == 0:
            raise ConfigError("SelectiveRiskControl.fit: no tuning questions")
        levels = self.config.levels
        shares = np.arange(1, levels) / levels
        grid = np.unique(np.quantile(c, 1.0 - shares, method="higher"))[::-1]
        self.grid_ = np.r_[grid, -np.inf]
        answered = c[None, :] >= self.grid_[:, None]
        n = answered.sum(axis=1)
        self.tune_share_ = n / c.size
        self.tune_risk_ = np.where(n > 0, (answered & ~ok[None, :]).sum(axis=1) / np.maximum(n, 1), 1.0)
        return self

    def _predicted(self, n: int) -> FloatArray:
        """Per grid point, the p-value a calibration of ``n`` questions gets at the tuning figures' counts."""
        if self.grid_ is None or self.tune_share_ is None or self.tune_risk_ is None:
            raise ConfigError("SelectiveRiskControl: call fit() first")
        expected_n = np.rint(self.tune_share_ * n).astype(np.int64)
        expected_k = np.floor(self.tune_risk_ * expected_n + 0.5).astype(np.int64)
        return selective_p_values(expected_n, np.minimum(expected_k, expected_n), self.config.alpha)

    def sequence(self, n: int) -> npt.NDArray[np.int64]:
        """The fixed-sequence order for a calibration of ``n`` questions: from the grid point whose test the
        tuning figures predict to pass most surely (smallest p-value at the expected counts; ties: the
        lower threshold) towards lower thresholds."""
        predicted = self._predicted(n)
        start = int(np.flatnonzero(predicted == predicted.min())[-1])
        return np.arange(start, predicted.size, dtype=np.int64)

    def predicted_share(self, n: int) -> float:
        """The share of questions the tuning figures predict a calibration of ``n`` questions to certify:
        the tuning share answered at the lowest threshold the fixed sequence passes at the expected counts
        (0 when it passes none)."""
        passed = control_fwer(self._predicted(n), self.config.delta, "fixed_sequence", self.sequence(n))
        assert self.tune_share_ is not None
        return float(self.tune_share_[passed].max()) if passed.any() else 0.0

    def conformalize(self, confidence: npt.ArrayLike, correct: npt.ArrayLike) -> SelectiveRiskControl:
        """Certify the threshold on calibration questions disjoint from the tuning ones."""
        c, ok = _checked(confidence, correct, "SelectiveRiskControl.conformalize")
        if self.grid_ is None:
            raise ConfigError("SelectiveRiskControl: call fit() before conformalize()")
        self.calibration_size_ = int(c.size)
        self.threshold_ = self.answered_share_ = self.accuracy_ = None
        self.order_ = self.sequence(c.size) if c.size else np.zeros(0, dtype=np.int64)
        if c.size == 0:
            self.p_values_ = np.ones(self.grid_.size)
            return self
        answered = c[None, :] >= self.grid_[:, None]
        self.p_values_ = selective_p_values(answered.sum(axis=1), (answered & ~ok[None, :]).sum(axis=1),
                                            self.config.alpha)
        valid = control_fwer(self.p_values_, self.config.delta, "fixed_sequence", self.order_)
        if valid.any():
            best = int(np.flatnonzero(valid).max())  # the lowest certified threshold
            self.threshold_ = float(self.grid_[best])
            mask = answered[best]
            self.answered_share_ = float(mask.mean())
            self.accuracy_ = float(ok[mask].mean())
        return self

    @property
    def certified(self) -> bool:
        return self.threshold_ is not None

    def predict(self, confidence: npt.ArrayLike) -> BoolArray:
        """``True`` where the question is answered (confidence ≥ the certified threshold), ``False`` where
        the answer is "not sure" (everywhere when nothing was certified)."""
        c = np.asarray(confidence, dtype=np.float64)
        if self.threshold_ is None:
            return np.zeros(c.shape, dtype=bool)
        return np.asarray(c >= self.threshold_, dtype=bool)

    def promise(self, condition: str = "") -> str:
        """What an answered question is promised, in words (empty when nothing is certified);
        ``condition``: the threshold in the caller's words (default ``confidence ≥ t``)."""
        if self.threshold_ is None:
            return ""
        a, d = self.config.alpha, self.config.delta
        condition = condition or f"confidence ≥ {self.threshold_:.4g}"
        return (f"accuracy ≥ {1 - a:g} among the questions answered ({condition}), "
                f"with probability ≥ {1 - d:g} over the {self.calibration_size_} calibration questions "
                "(Learn-then-Test, fixed sequence, binomial p-values)")


def choose_confidence(candidates: Mapping[str, npt.ArrayLike], correct: npt.ArrayLike, n: int,
                      config: SelectiveConfig) -> str:
    """Of several confidence scores of the same tuning answers, the one whose rule the tuning questions
    predict to answer the most with a calibration of ``n`` questions (:meth:`SelectiveRiskControl.
    predicted_share`; the first listed wins ties). Only tuning data and ``n`` enter, so the rule then
    certified on calibration questions keeps its guarantee."""
    if not candidates:
        raise ConfigError("choose_confidence: no candidate scores")
    share = {name: SelectiveRiskControl(config).fit(c, correct).predicted_share(n)
             for name, c in candidates.items()}
    return max(share, key=lambda name: share[name])  # max keeps the first of equals


def questions_needed(alpha: float, delta: float, accuracy: float) -> int | None:
    """The fewest calibration questions with which an arm of this ``accuracy`` answering everything gets
    certified (:func:`kgwise.conformal.ltt.calibration_questions_needed` at miss rate ``1 − accuracy``);
    ``None`` when its accuracy is below ``1 − alpha``."""
    if not 0.0 <= accuracy <= 1.0 or math.isnan(accuracy):
        raise ConfigError(f"accuracy must lie in [0, 1], got {accuracy}")
    return calibration_questions_needed(alpha, delta, 1.0 - accuracy)
