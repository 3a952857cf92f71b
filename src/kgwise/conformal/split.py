"""Split conformal prediction (Eq. 1) and LAC/APS prediction sets for multiple-choice probabilities.

The estimator follows MAPIE's shape: ``conformalize`` on held-out calibration data, then ``predict_set``.
The quantile is the ``⌈(n+1)(1−α)⌉``-th smallest calibration score (``+∞`` when that rank exceeds ``n``),
so ``P(y ∈ C(x)) ≥ 1 − α`` for exchangeable data.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, write_text_atomic

__all__ = [
    "ChoiceScore",
    "SplitConformal",
    "SplitConformalConfig",
    "aps_scores",
    "conformal_quantile",
    "conformal_rank",
    "label_set",
    "lac_scores",
    "min_calibration_size",
    "pac_conformal_quantile",
    "pac_rank",
]

ChoiceScore = Literal["lac", "aps"]
FloatArray = npt.NDArray[np.float64]


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
        raise ConfigError(f"alpha must be in [0, 1], got {alpha}")


def conformal_rank(n: int, alpha: float) -> int:
    """``⌈(n+1)(1−α)⌉`` (1-based rank of the calibration score used as the quantile, Eq. 1)."""
    _check_alpha(alpha)
    # the small tolerance keeps e.g. (99+1)*(1-0.1) = 90.00000000000001 from rounding up to 91
    return max(0, math.ceil((n + 1) * (1.0 - alpha) - 1e-9))


def min_calibration_size(alpha: float) -> int:
    """The fewest calibration scores whose quantile at ``alpha`` is finite: the smallest ``n`` with
    ``⌈(n+1)(1−α)⌉ ≤ n``, i.e. ``n ≥ 1/α − 1`` (MAPIE refuses fewer as well)."""
    _check_alpha(alpha)
    if alpha == 0.0:
        raise ConfigError("alpha = 0 asks for every choice in every set: no calibration size suffices")
    n = max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))
    return n if conformal_rank(n, alpha) <= n else n + 1


def conformal_quantile(scores: npt.ArrayLike, alpha: float) -> float:
    """The ``⌈(n+1)(1−α)⌉/n`` empirical quantile of ``scores`` (Eq. 1): the ``⌈(n+1)(1−α)⌉``-th order
    statistic; ``+∞`` when the rank exceeds ``n`` and ``−∞`` when it is 0. Infinite scores are allowed."""
    return _order_statistic(scores, lambda n: conformal_rank(n, alpha), "conformal_quantile")


def _order_statistic(scores: npt.ArrayLike, rank: Callable[[int], int], who: str) -> float:
    """The ``rank(n)``-th (1-based) smallest of the ``n`` ``scores``: ``+∞`` past ``n``, ``−∞`` at 0;
    ``ConfigError`` naming ``who`` for no scores or a NaN among them."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0:
        raise ConfigError(f"{who}: no calibration scores")
    if np.isnan(s).any():
        raise ConfigError(f"{who}: NaN among the calibration scores")
    k = rank(s.size)
    if k > s.size:
        return math.inf
    if k == 0:
        return -math.inf
    return float(np.partition(s, k - 1)[k - 1])


@functools.lru_cache(maxsize=4096)
def pac_rank(n: int, alpha: float, delta: float) -> int:
    """The smallest 1-based rank ``k`` whose order statistic, used as the threshold, covers with probability
    ≥ 1 − α with confidence ≥ 1 − δ over the calibration draw (training-conditional split conformal, Vovk
    2012): the coverage of the ``k``-th of ``n`` exchangeable scores is ``Beta(k, n − k + 1)``, so ``k`` is
    the smallest with ``P(Beta(k, n − k + 1) < 1 − α) ≤ δ``; ``n + 1`` when no rank suffices."""
    _check_alpha(alpha)
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    from scipy.stats import beta

    for k in range(max(1, conformal_rank(n, alpha)), n + 1):
        if float(beta.cdf(1.0 - alpha, k, n - k + 1)) <= delta:
            return k
    return n + 1


def pac_conformal_quantile(scores: npt.ArrayLike, alpha: float, delta: float) -> float:
    """The :func:`pac_rank`-th order statistic of ``scores`` (``+∞`` when the rank exceeds ``n``)."""
    return _order_statistic(scores, lambda n: pac_rank(n, alpha, delta), "pac_conformal_quantile")


def _check_probs(probs: npt.ArrayLike) -> FloatArray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] == 0:
        raise ConfigError(f"choice probabilities must be a 2-d (questions, choices) array, got {p.shape}")
    if np.isnan(p).any() or (p < 0).any():
        raise ConfigError("choice probabilities must be non-negative numbers")
    return p


def lac_scores(probs: npt.ArrayLike) -> FloatArray:
    """LAC score of every (question, choice): ``1 − p(choice)`` (Sadinle et al. 2019)."""
    return 1.0 - _check_probs(probs)


def aps_scores(probs: npt.ArrayLike) -> FloatArray:
    """APS score of every (question, choice): the total probability of the choices ranked at or above it
    (non-randomised APS, Romano et al. 2020); ties are ranked by choice index."""
    p = _check_probs(probs)
    order = np.argsort(-p, axis=1, kind="stable")
    cum = np.cumsum(np.take_along_axis(p, order, axis=1), axis=1)
    out = np.empty_like(p)
    np.put_along_axis(out, order, cum, axis=1)
    return out


@dataclass(frozen=True, slots=True)
class SplitConformalConfig:
    """``alpha``: target miscoverage; ``score``: ``lac`` or ``aps``."""

    alpha: float = 0.1
    score: ChoiceScore = "lac"

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        if self.score not in ("lac", "aps"):
            raise ConfigError(f"score must be 'lac' or 'aps', got {self.score!r}")


class SplitConformal:
    """Split conformal prediction sets over the choices of multiple-choice questions: there is nothing to
    fit (the probabilities come from an already trained model, MAPIE's ``prefit``), so :meth:`conformalize`
    then :meth:`predict_set`."""

    def __init__(self, config: SplitConformalConfig | None = None) -> None:
        self.config = config or SplitConformalConfig()
        self.calibration_scores_: FloatArray | None = None
        self.meta: dict[str, Any] = {}
        """What :meth:`save` was given as ``meta`` (read back by :meth:`load`)."""

    def scores(self, probs: npt.ArrayLike) -> FloatArray:
        """Non-conformity score of every (question, choice) under the configured score (by name, from
        :data:`kgwise.conformal.scores.CHOICE_SCORES`)."""
        from kgwise.conformal.scores import choice_score  # the registry reads this module's scores

        return choice_score(self.config.score)(probs)

    def conformalize(self, probs: npt.ArrayLike | Sequence[npt.ArrayLike], labels: npt.ArrayLike
                     ) -> SplitConformal:
        """Store the calibration scores ``s_i = S(x_i, y_i)`` of the true choices ``labels`` (indices).
        ``probs``: a ``(questions, choices)`` array, or one probability vector per question when the
        questions have different numbers of choices."""
        y = np.asarray(labels, dtype=np.int64)
        rows = probs if isinstance(probs, list | tuple) else None
        if rows is not None and len({np.size(r) for r in rows}) > 1:
            if len(rows) != y.size:
                raise ConfigError(f"{len(rows)} probability vectors but {y.size} labels")
            scores = []
            for r, label in zip(rows, y.tolist(), strict=True):
                s = self.scores(np.asarray([r], dtype=np.float64))
                if not 0 <= label < s.shape[1]:
                    raise ConfigError(f"label {label} outside 0..{s.shape[1] - 1}")
                scores.append(s[0, label])
            self.calibration_scores_ = np.asarray(scores, dtype=np.float64)
            return self
        s = self.scores(np.asarray(probs, dtype=np.float64))
        if y.shape != (s.shape[0],) or (y < 0).any() or (y >= s.shape[1]).any():
            raise ConfigError(f"labels must be {s.shape[0]} choice indices in 0..{s.shape[1] - 1}")
        self.calibration_scores_ = s[np.arange(len(y)), y]
        return self

    def quantile(self, alpha: float | None = None) -> float:
        """The calibrated threshold ``q̂`` at ``alpha`` (default: the configured one; ``+∞`` at 0).
        ``ConfigError`` when the calibration holds too few scores for a finite one at ``alpha > 0``."""
        if self.calibration_scores_ is None:
            raise ConfigError("SplitConformal: call conformalize() before predict_set()")
        level = self.config.alpha if alpha is None else alpha
        if level == 0.0:
            return math.inf  # every choice, in every set: what α = 0 asks for
        need, have = min_calibration_size(level), self.calibration_scores_.size
        if have < need:
            raise ConfigError(f"α = {level:g} needs at least {need} calibration questions, the calibration "
                              f"has {have}: every set would hold every choice; use a larger α or "
                              "calibrate on more questions")
        return conformal_quantile(self.calibration_scores_, level)

    def predict_set(self, probs: npt.ArrayLike, alpha: float | None = None) -> npt.NDArray[np.bool_]:
        """Boolean ``(questions, choices)`` mask of ``{y : S(x, y) ≤ q̂}``."""
        return self.scores(probs) <= self.quantile(alpha)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, meta: Mapping[str, Any] | None = None) -> Path:
        """Write the config, the calibration scores and ``meta`` (e.g. what produced the probabilities)
        to one JSON file."""
        if self.calibration_scores_ is None:
            raise ConfigError("SplitConformal: nothing to save before conformalize()")
        body = {"kind": "SplitConformal", "config": asdict(self.config),
                "calibration_scores": self.calibration_scores_.tolist(),
                "meta": dict(self.meta if meta is None else meta)}
        return write_text_atomic(path, json.dumps(body, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> SplitConformal:
        """A calibration saved by :meth:`save`; ``DataError`` naming the file otherwise."""
        p = Path(path)
        body = read_json(p)
        try:
            if body.get("kind") != "SplitConformal":
                raise ValueError(f"kind is {body.get('kind')!r}")
            out = cls(SplitConformalConfig(**body["config"]))
            scores = np.asarray(body["calibration_scores"], dtype=np.float64)
            out.meta = dict(body.get("meta") or {})
        except (AttributeError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"not a kgwise calibration file: {exc}", p) from exc
        if scores.ndim != 1 or scores.size == 0:
            raise DataError("calibration file holds no calibration scores", p)
        out.calibration_scores_ = scores
        return out


def label_set(conformal: SplitConformal, probabilities: Mapping[str, float], alpha: float | None = None
              ) -> tuple[str, ...]:
    """The calibrated set of choice labels for one answer's ``{label: probability}`` (e.g.
    :attr:`kgwise.types.Answer.probabilities`), in the mapping's order."""
    labels: Sequence[str] = list(probabilities)
    if not labels:
        raise ConfigError("label_set: no choice probabilities")
    mask = conformal.predict_set(np.asarray([[probabilities[k] for k in labels]]), alpha)[0]
    return tuple(lab for lab, keep in zip(labels, mask.tolist(), strict=True) if keep)
