"""UAG (Ni et al. 2025): calibrated answer sets from the UQ-aware retriever and evaluator, with the global
error-rate controller (Eq. 2–3, Theorems 1–3).

``λ = (α1, α2, α3, s)``: ``(α1, α2, α3)`` runs over ``{0, h, 2h, …, 1−h}³`` and ``s`` over the evaluator
scores ``UAGConfig.evaluator_scores`` — ``absolute`` (Eq. 6 as written) and ``relative`` (Eq. 6 minus the
question's best Eq. 6 score; a kgwise addition: a threshold on it keeps the candidates about as close to
the generation as the closest one, so a question whose generation matches a candidate gets a small set),
and, for tables with item-level scores, the same two against the generation's listed items; and any
registered candidate score fitted on the tuning split (``learned``: :mod:`kgwise.conformal.learned`, a
logistic regression of "gold" on the candidate's retrieval, path and evaluator features), whose threshold
then takes Eq. 6's place in the set. Learnt from the tuning split only, it keeps the guarantee below.
With ``UAGConfig.scored_step`` Λ gains α4 for a second, scored retriever (e.g. a GNN's candidates, see
:meth:`TableBatch.with_scored`): the set becomes the union of the above and the retriever's candidates
whose non-conformity is under the α4 quantile; α4 = 1 adds none, so the family without it is contained.
Each ``α_k`` maps to the threshold ``q_{α_k}`` = Eq. 1's conformal quantile of the component's
per-question scores on a *tuning* split (``α_k = 0`` → ``+∞``, no filtering; ``α_k = 1`` would empty every
set and is left out). The loss is the miss ``L_λ = 1{no gold answer in C_λ(X)}`` (Theorem 3's proof). On a
disjoint *calibration* split LTT tests ``H0_λ: E[L_λ] > α`` for every λ and keeps the rejected ones
(Λ_valid); the selected λ is the valid one with the smallest mean set size on the tuning split. The
fixed-sequence order is learned on the tuning split too (its (risk, size) Pareto front, lowest risk
first, after the λ with the largest sets: :func:`pareto_order`), so the guarantee
``P(E[L_λ̂ | D_cal] ≤ α) ≥ 1 − δ`` holds for the guaranteed FWER methods whatever the family Λ. With
``fwer="top_p"`` (the paper's choice) it does not.

There is no marginal (split CP) mode. One ran split CP on the scored threshold ``t4`` over the path
part chosen on the tuning split and abstained when the calibration quantile was ``+∞`` (more than α of the
calibration questions beyond both retrievers). Split CP's ``P(E ≤ q̂) ≥ 1 − α`` counts a question with
``E = +∞`` as covered when ``q̂ = +∞``, so the guarantee held only with abstentions counted as covered:
where the retrievers reach about ``1 − α`` of the questions it certified on lucky calibration draws and
then covered less than ``1 − α`` (a held-out KGQA log at α = 0.3: 8 of 20 splits certified, mean coverage
.692; synthetic tables reaching .769 of the questions, 60 tuning and 60 calibration questions: 18 of 200
certified, mean coverage .673). Fixed-sequence LTT in that regime (``tests/guarantees/test_guarantees.py``,
reach .759): 37 of 200 certified, 2 short of 1 − α, mean coverage .748. Learn-then-Test's
PAC statement has no such hole: an abstention is no violation and a certified λ's risk exceeds α with
probability ≤ δ.

Usage::

    uag = UAG(UAGConfig(alpha=0.2)).fit(tune_batch).calibrate(cal_batch)
    table = question_table(question, retriever, evaluator)   # live: retrieve, generate, score
    answers = uag.answer_labels(table, retriever.kg)         # the calibrated answer set, best first
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from kgwise.conformal.evaluator import UQEvaluator
from kgwise.conformal.grid import (
    EVALUATOR_SCORES,
    EvaluatorScore,
    GridResult,
    QuestionTable,
    TableBatch,
    scored_members,
)
from kgwise.conformal.ltt import LTTConfig, LTTResult, learn_then_test
from kgwise.conformal.retriever import UQRetriever
from kgwise.conformal.scores import CANDIDATE_SCORES, CandidateScorer, candidate_score
from kgwise.conformal.split import conformal_quantile
from kgwise.errors import ConfigError
from kgwise.kg.base import KnowledgeGraph, normalise_label
from kgwise.settings import table
from kgwise.types import Question

__all__ = ["CROSS_FIT_FOLDS", "UAG", "UAGConfig", "alpha_levels", "config_from_dict", "config_to_dict",
           "cross_fitted", "front_and_chain", "nested_chain", "pareto_order", "question_table",
           "size_thresholds", "with_chains"]

FloatArray = npt.NDArray[np.float64]
Order = Literal["front", "front+chain"]


def alpha_levels(h: float) -> FloatArray:
    """``{0, h, 2h, …}`` below 1 (rounded to 10 decimals)."""
    if not 0.0 < h < 1.0:
        raise ConfigError(f"grid step h must be in (0, 1), got {h}")
    n = math.ceil(1.0 / h - 1e-9)
    return np.round(np.arange(n) * h, 10)


def pareto_order(risk: FloatArray, size: FloatArray, first: int | None = None) -> npt.NDArray[np.int64]:
    """The fixed-sequence order: the λ on the tuning split's (risk, size) Pareto front, lowest risk (largest
    sets) first. A dominated λ (no smaller set at no more risk) would never be selected, yet testing it
    could end the sequence early; leaving it out uses the tuning data only, so the guarantee is kept.

    ``first``: a λ tested before the front (and not again). UAG passes the one whose set contains every
    other λ's set: its loss count is the smallest on any data, so its p-value is too; if it is accepted no
    λ could be rejected, so putting it first never ends a sequence that would have certified something,
    and when the tuning split is small its front may start with a λ that tuning luck alone put there
    (7 tuning questions: every λ that covers the 6 reachable ones ties at the lowest risk, and the
    smallest of them misses half the calibration questions), which would end the sequence at once."""
    order = np.lexsort((size, risk))
    best_before = np.minimum.accumulate(np.r_[np.inf, size[order][:-1]])
    front = order[size[order] < best_before].astype(np.int64)
    if first is None:
        return front
    return np.r_[np.int64(first), front[front != first]].astype(np.int64)


CROSS_FIT_FOLDS = 5
"""Folds of the tuning split over which a learned score is cross-fitted for the tuning split's own
thresholds, risks and sizes."""


def cross_fitted(kind: str, tune: TableBatch, whole: CandidateScorer, folds: int = CROSS_FIT_FOLDS
                 ) -> FloatArray:
    """Learned score ``kind`` on every tuning candidate, each question scored by a fit on the other
    folds (question ``i`` in fold ``i mod folds``). Scored by the fit on the whole tuning split, its
    own questions look easier than new ones (their gold answers were in the fit), so the thresholds,
    the fixed sequence and the choice of λ̂ — all learnt on the tuning split — would favour the learned
    score where it does no better on new questions; cross-fitted scores behave like a new question's.
    Only tuning data enter, so the guarantee is unchanged. With fewer than ``folds`` tuning questions,
    or a fold whose complement lacks gold or non-gold candidates, ``whole`` (the whole-split fit) scores
    them."""
    rule = candidate_score(kind)
    out = whole.scores(tune)
    n = tune.num_questions
    if n < folds:
        return out
    fold = np.arange(n) % folds
    for f in range(folds):
        rest = tune.subset(np.flatnonzero(fold != f))
        if not 0 < int(rest.gold.sum()) < rest.gold.size:
            continue
        held = np.flatnonzero(fold == f)
        out[np.isin(tune.node_q, held)] = rule.fit(rest).scores(tune.subset(held))
    return out


def with_chains(order: npt.ArrayLike, risk: FloatArray, size: FloatArray, chains: npt.ArrayLike
                ) -> npt.NDArray[np.int64]:
    """A fixed sequence with fine steps: ``order``'s first λ (the largest set), then ``order``'s other λ
    and the λ of ``chains`` together, by tuning ``risk`` ascending and, at equal risk, tuning ``size``
    descending. The Pareto front alone jumps, at the lowest tuning risk, from the largest set straight to
    the smallest set that covers every reachable tuning question; a calibration split with more
    unreachable questions (no slack left) then rejects that one λ and the sequence ends at the largest
    set. Adding a chain of nested sets (one score's thresholds, largest first) puts smaller steps before
    it, so the sequence stops where the calibration data put the risk above α. A λ whose tuning size is
    not below every earlier one's is left out: it would never be selected, yet could end the sequence.
    The order uses the tuning split only, so the guarantee of fixed-sequence testing holds."""
    seq = np.asarray(order, dtype=np.int64)
    rest = np.setdiff1d(np.union1d(seq[1:], np.asarray(chains, dtype=np.int64)), seq[:1])
    merged = np.r_[seq[:1], rest[np.lexsort((-size[rest], risk[rest]))]].astype(np.int64)
    before = np.minimum.accumulate(np.r_[np.inf, size[merged][:-1]])
    return merged[size[merged] < before]


def size_thresholds(scores: FloatArray, questions: int, levels: FloatArray) -> FloatArray:
    """Thresholds of a learned candidate score, one per level ``a`` of ``levels`` (descending, so the
    thresholds ascend): the one that keeps ``m^(1 − a)`` candidates per question on average over the
    tuning split, ``m`` its mean candidate count (``a = 0``: ``+∞``, every candidate; ``a`` near 1: about
    one). Geometric steps in set size, rather than in the tuning questions' coverage, give the fixed
    sequence fine steps near "keep every reachable answer", where α = 0.1 sits (WebQSP's retrieval reaches
    .923 of the questions, so a set may lose about 0.5 % of them)."""
    finite = np.sort(scores[np.isfinite(scores)])
    m = scores.size / max(questions, 1)
    out = np.full(levels.size, np.inf)
    for i, a in enumerate(levels.tolist()):
        keep = round(questions * m ** (1.0 - a))
        if a > 0 and keep < finite.size:
            out[i] = finite[max(keep, 1) - 1]
    return np.maximum.accumulate(out)


def nested_chain(risk: FloatArray, size: FloatArray, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    """A fixed-sequence order of nested sets, learned on the tuning split: from the largest set (every
    α_k = 0, the last index of each level axis; α4 kept there) one step at a time, each step raising one
    of α1, α2, α3 by one level (a smaller threshold, so a subset of the previous set), the step with the
    lowest tuning ``risk`` and then the smallest tuning ``size``; the evaluator score is chosen at the
    first step (all scores share the largest set). Along it the calibration misses can only grow, so
    fixed-sequence testing stops only where the calibration data put the risk above α."""
    r, sz = risk.reshape(shape), size.reshape(shape)
    v0, i0, j0, k0, m = 0, shape[1] - 1, shape[2] - 1, shape[3] - 1, shape[4] - 1
    chain = [(v0, i0, j0, k0, m)]
    steps = [(v, i0 - (d == 0), j0 - (d == 1), k0 - (d == 2), m) for v in range(shape[0]) for d in range(3)]
    while steps := [c for c in steps if min(c[1:4]) >= 0]:
        best = min(steps, key=lambda c: (r[c], sz[c]))
        chain.append(best)
        v, i, j, k, _ = best
        steps = [(v, i - 1, j, k, m), (v, i, j - 1, k, m), (v, i, j, k - 1, m)]
    return np.asarray([np.ravel_multi_index(c, shape) for c in chain], dtype=np.int64)


@table("uag")
@dataclass(frozen=True, slots=True)
class UAGConfig:
    """``alpha``: target miss rate; ``steps``: the grid step ``h`` for (α1, α2, α3) (paper: 0.3, 0.3, 0.1;
    default here 0.05, 0.05, 0.025: 16,000 λ per evaluator score); ``evaluator_scores``: the Eq. 6 score
    variants in Λ (``("absolute",)`` is the paper's family), of
    :data:`~kgwise.conformal.grid.EVALUATOR_SCORES` or a registered candidate score (``learned``: fitted
    on the tuning split); ``scored_step``: grid step of α4 for a scored retriever's candidates
    (``None``: no such retriever, the paper's UAG); ``ltt``: δ (0.05), FWER method, p-value; ``order``:
    the fixed sequence, ``"front"`` (:func:`pareto_order`) or
    ``"front+chain"`` (the largest set at δ, then that front and :func:`nested_chain` at δ/2 each: for
    small tuning splits, whose front is coarse)."""

    alpha: float = 0.1
    steps: tuple[float, float, float] = (0.05, 0.05, 0.025)
    evaluator_scores: tuple[EvaluatorScore, ...] = ("absolute", "relative")
    scored_step: float | None = None
    ltt: LTTConfig = field(default_factory=LTTConfig)
    order: Order = "front"

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"alpha must be in (0, 1), got {self.alpha}")
        if len(self.steps) != 3:
            raise ConfigError("steps needs one grid step per component (α1, α2, α3)")
        for h in (*self.steps, *(() if self.scored_step is None else (self.scored_step,))):
            alpha_levels(h)
        if not self.evaluator_scores or len(set(self.evaluator_scores)) != len(self.evaluator_scores):
            raise ConfigError("evaluator_scores must list distinct score kinds")
        for kind in self.evaluator_scores:
            if kind not in EVALUATOR_SCORES and kind not in CANDIDATE_SCORES:
                raise ConfigError(f"unknown evaluator score {kind!r}; choose from "
                                  f"{', '.join((*EVALUATOR_SCORES, *CANDIDATE_SCORES))}")
        if self.order not in ("front", "front+chain"):
            raise ConfigError(f"order must be 'front' or 'front+chain', got {self.order!r}")
        if self.order == "front+chain" and self.ltt.fwer != "fixed_sequence":
            raise ConfigError("order='front+chain' splits δ between two fixed sequences: it needs "
                              "fwer='fixed_sequence'")


def config_to_dict(config: UAGConfig) -> dict[str, Any]:
    """``config`` as JSON data (:func:`config_from_dict` reads it back; no scored retriever)."""
    return {"alpha": config.alpha, "steps": list(config.steps),
            "evaluator_scores": list(config.evaluator_scores), "ltt": asdict(config.ltt),
            "order": config.order}


def config_from_dict(raw: dict[str, Any]) -> UAGConfig:
    """Inverse of :func:`config_to_dict` (``order`` defaults to ``"front"``, as files without it were
    written); ``KeyError``/``TypeError``/``ConfigError`` on a malformed one."""
    return UAGConfig(alpha=float(raw["alpha"]), steps=tuple(raw["steps"]),
                     evaluator_scores=tuple(raw["evaluator_scores"]), ltt=LTTConfig(**raw["ltt"]),
                     order=raw.get("order", "front"))


class UAG:
    """The UAG estimator: ``fit`` (tuning split) → ``calibrate`` (calibration split) → ``predict_set``."""

    def __init__(self, config: UAGConfig | None = None) -> None:
        self.config = config or UAGConfig()
        self.levels_: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self.thresholds_: tuple[FloatArray, FloatArray, FloatArray] | None = None  # T3: a row per score kind
        self.scored_levels_: FloatArray = np.ones(1)  # α4, first 1 (no scored candidates)
        self.scored_thresholds_: FloatArray = np.full(1, -np.inf)
        self.tune_risk_: FloatArray | None = None
        self.tune_size_: FloatArray | None = None
        self.order_: npt.NDArray[np.int64] | None = None
        self.chain_: npt.NDArray[np.int64] | None = None
        self.result_: LTTResult | None = None
        self.lambda_: tuple[float, float, float, float] | None = None
        self.index_: int | None = None  # λ̂'s flat grid index
        self.chosen_thresholds_: tuple[float, float, float, float] | None = None
        self.evaluator_score_: EvaluatorScore | None = None
        self.learned_: dict[str, CandidateScorer] = {}  # the candidate scores fitted on the tuning split

    # ------------------------------------------------------------------ fit (tuning split)
    def fit(self, tune: TableBatch) -> UAG:
        """Eq. 1 thresholds per grid level from the tuning split; tuning risk and set size of every λ (for
        LTT). A learned score is fitted here first, on the whole tuning split (the sets use that fit); the
        tuning split's own thresholds, risks and sizes use its cross-fitted scores (:func:`cross_fitted`).
        Its thresholds step geometrically in the tuning set size (:func:`size_thresholds`) and its
        thresholds alone join the fixed sequence as a chain of nested sets (:func:`with_chains`)."""
        if tune.num_questions == 0:
            raise ConfigError("UAG.fit: empty tuning split")
        comp = tune.component_scores()
        levels = [alpha_levels(h)[::-1] for h in self.config.steps]  # descending α → ascending thresholds
        learned = [k for k in self.config.evaluator_scores if k in CANDIDATE_SCORES]
        self.learned_ = {k: candidate_score(k).fit(tune) for k in learned}
        # the tuning split under each evaluator score; a learned one cross-fitted (never its own fit's)
        scored = [tune.with_eq6(cross_fitted(kind, tune, self.learned_[kind])) if kind in self.learned_
                  else self.rescored(tune, kind) for kind in self.config.evaluator_scores]

        def quantiles(scores: FloatArray, k: int) -> FloatArray:
            return np.asarray([conformal_quantile(scores, float(x)) for x in levels[k]])

        def t3_row(kind: EvaluatorScore, batch: TableBatch) -> FloatArray:
            if kind not in self.learned_:
                return quantiles(batch.component_scores()[:, 2], 2)
            return size_thresholds(batch.eq6, tune.num_questions, levels[2])

        t3 = np.stack([t3_row(kind, b) for kind, b in zip(self.config.evaluator_scores, scored, strict=True)])
        self.levels_ = (levels[0], levels[1], levels[2])
        self.thresholds_ = (quantiles(comp[:, 0], 0), quantiles(comp[:, 1], 1), t3)
        if self.config.scored_step is not None:
            self._check_scored(tune)
            s4 = tune.scored_component()
            lv = alpha_levels(self.config.scored_step)[::-1]
            self.scored_levels_ = np.concatenate([[1.0], lv])
            t4 = [conformal_quantile(s4, float(x)) for x in lv]
            self.scored_thresholds_ = np.concatenate([[-np.inf], t4])
        covered, size = self._totals(tune, sizes=True, scored=scored)
        self.tune_risk_ = 1.0 - covered / tune.num_questions
        self.tune_size_ = size / tune.num_questions
        self.order_ = pareto_order(self.tune_risk_, self.tune_size_, first=self.largest_index)
        if self.learned_:
            self.order_ = with_chains(self.order_, self.tune_risk_, self.tune_size_, self._learned_chains())
        self.chain_ = nested_chain(self.tune_risk_, self.tune_size_, self.grid_shape)
        return self

    def _learned_chains(self) -> npt.NDArray[np.int64]:
        """The flat indices of each learned score's thresholds alone (no path filtering: α1 = α2 = 0,
        every scored candidate), largest set first."""
        shape = self.grid_shape
        v = [i for i, k in enumerate(self.config.evaluator_scores) if k in self.learned_]
        cells = [(i, shape[1] - 1, shape[2] - 1, k, shape[4] - 1) for i in v
                 for k in range(shape[3] - 1, -1, -1)]
        return np.asarray([np.ravel_multi_index(c, shape) for c in cells], dtype=np.int64)

    def rescored(self, batch: TableBatch, kind: EvaluatorScore) -> TableBatch:
        """``batch`` with the scores of evaluator score ``kind`` in Eq. 6's place (a learned one as
        :meth:`fit` fitted it)."""
        if kind not in CANDIDATE_SCORES:
            return batch.rescored(kind)
        if kind not in self.learned_:
            raise ConfigError(f"UAG: evaluator score {kind!r} is learned by fit(); call fit() first")
        return batch.with_eq6(self.learned_[kind].scores(batch))

    @property
    def largest_index(self) -> int:
        """The flat index of the λ whose set contains every other's: ``α1 = α2 = α3 = 0`` (no path
        filtering) and, with a scored retriever, ``α4 = 0`` (every scored candidate)."""
        shape = self.grid_shape
        return int(np.ravel_multi_index((0, shape[1] - 1, shape[2] - 1, shape[3] - 1, shape[4] - 1), shape))

    def grid(self, batch: TableBatch, sizes: bool = True, keep: npt.NDArray[np.bool_] | None = None,
             scored: Sequence[TableBatch] | None = None) -> GridResult:
        """Coverage and size of the path part (Eq. 4–6) of every question at every ``(s, α1, α2, α3)``,
        shaped ``(questions, *grid_shape[:4])``; ``keep`` restricts it to those nodes (after rescoring);
        ``scored``: ``batch`` already rescored under each evaluator score."""
        if self.thresholds_ is None:
            raise ConfigError("UAG: call fit() first")
        t1, t2, t3 = self.thresholds_
        if scored is None:
            scored = [self.rescored(batch, kind) for kind in self.config.evaluator_scores]
        parts = [(b if keep is None else b.masked(keep)).grid(t1, t2, t3[v], sizes=sizes)
                 for v, b in enumerate(scored)]
        return GridResult(np.stack([p.covered for p in parts], axis=1),
                          np.stack([p.size for p in parts], axis=1))

    def _check_scored(self, batch: TableBatch) -> None:
        if self.config.scored_step is not None and batch.scored is None:
            raise ConfigError("UAGConfig.scored_step needs tables with a scored retriever "
                              "(TableBatch.with_scored)")

    def _totals(self, batch: TableBatch, sizes: bool, scored: Sequence[TableBatch] | None = None
                ) -> tuple[FloatArray, FloatArray]:
        """Covered-question count and set-size sum over ``batch`` per flat λ (sizes zero unless
        ``sizes``). The union with the scored part:
        covered if either part covers; size = both sizes minus the nodes in both (only computed when some
        node has states and a finite ``scored``)."""
        self._check_scored(batch)
        if scored is None:
            scored = [self.rescored(batch, kind) for kind in self.config.evaluator_scores]
        base = self.grid(batch, sizes=sizes, scored=scored)
        part = batch.scored_grid(self.scored_thresholds_)
        n4 = self.scored_thresholds_.size
        covered = np.stack([(base.covered | part.covered[:, m, None, None, None, None]).sum(axis=0)
                            for m in range(n4)], axis=-1).astype(np.float64)
        if not sizes:
            return covered.ravel(), np.zeros(covered.size)
        size = base.size.sum(axis=0, dtype=np.float64)[..., None] + part.size.sum(axis=0, dtype=np.float64)
        if batch.scored is not None:
            with_state = np.zeros(batch.node_q.size, dtype=bool)
            with_state[batch.state_node] = True
            if (with_state & np.isfinite(batch.scored)).any():
                for m, t4 in enumerate(self.scored_thresholds_.tolist()):
                    keep = scored_members(batch.scored, t4)
                    size[..., m] -= self.grid(batch, keep=keep, scored=scored).size.sum(axis=0)
        return covered.ravel(), size.ravel()

    @property
    def grid_shape(self) -> tuple[int, int, int, int, int]:
        """``(evaluator scores, |α1 levels|, |α2 levels|, |α3 levels|, |α4 levels|)`` (one α4 level, 1,
        without a scored retriever)."""
        if self.levels_ is None:
            raise ConfigError("UAG: call fit() first")
        return (len(self.config.evaluator_scores), self.levels_[0].size, self.levels_[1].size,
                self.levels_[2].size, self.scored_levels_.size)

    def lambda_at(self, index: int) -> tuple[float, float, float, float]:
        """``(α1, α2, α3, α4)`` of flat grid index ``index`` (its evaluator score:
        :meth:`evaluator_score_at`)."""
        assert self.levels_ is not None
        _, i, j, k, m = np.unravel_index(index, self.grid_shape)
        return (float(self.levels_[0][i]), float(self.levels_[1][j]), float(self.levels_[2][k]),
                float(self.scored_levels_[m]))

    def evaluator_score_at(self, index: int) -> EvaluatorScore:
        """The evaluator score kind of flat grid index ``index``."""
        return self.config.evaluator_scores[int(np.unravel_index(index, self.grid_shape)[0])]

    def thresholds_at(self, index: int) -> tuple[float, float, float, float]:
        """``(t1, t2, t3, t4)`` of flat grid index ``index``."""
        assert self.thresholds_ is not None
        v, i, j, k, m = np.unravel_index(index, self.grid_shape)
        t1, t2, t3 = self.thresholds_
        return (float(t1[i]), float(t2[j]), float(t3[v, k]), float(self.scored_thresholds_[m]))

    # ------------------------------------------------------------------ calibrate (LTT)
    def adopt_fit(self, other: UAG) -> UAG:
        """Reuse another instance's ``fit`` (same tuning split and grid) under this instance's config."""
        if other.levels_ is None or other.config.steps != self.config.steps or (
            other.config.evaluator_scores != self.config.evaluator_scores
        ):
            raise ConfigError("UAG.adopt_fit: the other instance is not fitted on the same grid")
        if other.config.scored_step != self.config.scored_step:
            raise ConfigError("UAG.adopt_fit: the other instance has another scored_step")
        self.levels_, self.thresholds_ = other.levels_, other.thresholds_
        self.scored_levels_, self.scored_thresholds_ = other.scored_levels_, other.scored_thresholds_
        self.tune_risk_, self.tune_size_, self.order_ = other.tune_risk_, other.tune_size_, other.order_
        self.chain_, self.learned_ = other.chain_, other.learned_
        return self

    def loss_counts(self, cal: TableBatch) -> npt.NDArray[np.int64]:
        """``Σ_i L_λ(i)`` over ``cal`` for every flat grid index λ (misses: no gold answer in the set)."""
        covered, _ = self._totals(cal, sizes=False)
        return (cal.num_questions - covered).astype(np.int64)

    def calibrate(self, cal: TableBatch, alpha: float | None = None,
                  losses: npt.NDArray[np.int64] | None = None) -> UAG:
        """LTT on the calibration split (Theorem 1–2) and selection of λ̂ (Theorem 3); ``losses`` may
        pass precomputed :meth:`loss_counts` of ``cal``."""
        if self.levels_ is None:
            raise ConfigError("UAG: call fit() before calibrate()")
        if cal.num_questions == 0:
            raise ConfigError("UAG.calibrate: empty calibration split")
        a = self.config.alpha if alpha is None else alpha
        if losses is None:
            losses = self.loss_counts(cal)
        assert self.tune_size_ is not None
        if self.config.order == "front+chain":
            self.result_ = self._front_and_chain(losses, cal.num_questions, a)
        else:
            self.result_ = learn_then_test(losses, cal.num_questions, a, self.config.ltt, self.tune_size_,
                                           self.order_)
        return self.choose(self.result_.chosen)

    def choose(self, index: int | None) -> UAG:
        """Set λ̂ to flat grid index ``index`` (``None``: abstain)."""
        self.index_ = index
        if index is None:
            self.lambda_ = self.chosen_thresholds_ = self.evaluator_score_ = None
        else:
            self.lambda_ = self.lambda_at(index)
            self.chosen_thresholds_ = self.thresholds_at(index)
            self.evaluator_score_ = self.evaluator_score_at(index)
        return self

    def _front_and_chain(self, losses: npt.NDArray[np.int64], n: int, alpha: float) -> LTTResult:
        """``order="front+chain"`` on this instance's tuning order (:func:`front_and_chain`)."""
        assert self.tune_size_ is not None and self.order_ is not None and self.chain_ is not None
        return front_and_chain(losses, n, alpha, self.config.ltt, self.tune_size_, self.largest_index,
                               self.order_[1:], self.chain_[1:])

    @property
    def abstains(self) -> bool:
        """True when no λ was certified (Λ_valid empty): no set can be promised at this α and δ."""
        return self.chosen_thresholds_ is None

    # ------------------------------------------------------------------ predict
    def predict_set(self, table: QuestionTable) -> npt.NDArray[np.int64]:
        """Indices into ``table.node_ids`` of the final answer set, most similar to the generation first;
        raises ``ConfigError`` when calibration certified no λ."""
        if self.chosen_thresholds_ is None or self.evaluator_score_ is None:
            raise ConfigError("UAG: no valid λ at this α and δ (or not calibrated); nothing can be certified")
        if self.evaluator_score_ in CANDIDATE_SCORES:
            table = self.rescored(TableBatch.from_tables([table]), self.evaluator_score_).table(0)
        else:
            table = table.rescored(self.evaluator_score_)
        return table.final_set(*self.chosen_thresholds_)

    def answer_labels(self, table: QuestionTable, kg: KnowledgeGraph) -> list[str]:
        """The calibrated answer set of ``table`` as KG labels, best first; raises ``ConfigError`` when the
        set holds a scored candidate added without a KG node id (id −1)."""
        ids = table.node_ids[self.predict_set(table)]
        if (ids < 0).any():
            raise ConfigError(f"question {table.qid}: the set holds scored candidates without KG node ids; "
                              "pass node_ids to with_scored to label them")
        return [kg.label(int(i)) for i in ids.tolist()]

    def evaluate(self, batch: TableBatch) -> dict[str, FloatArray]:
        """Per question of ``batch`` at λ̂: ``covered``, ``size`` and ``hit1`` (top element is gold)."""
        if self.chosen_thresholds_ is None or self.evaluator_score_ is None:
            raise ConfigError("UAG: no valid λ at this α and δ (or not calibrated)")
        self._check_scored(batch)
        t1, t2, t3, t4 = self.chosen_thresholds_
        batch = self.rescored(batch, self.evaluator_score_)
        ok = (batch.prefix <= t1) & (batch.collect <= t2)
        in_c = np.zeros(batch.node_q.size, dtype=bool)
        in_c[batch.state_node[ok]] = True
        final = in_c & (batch.eq6 <= t3)
        scored = np.zeros(batch.node_q.size) if batch.scored is None else batch.scored
        if batch.scored is not None:
            final |= scored_members(batch.scored, t4)
        n = batch.num_questions
        size = np.bincount(batch.node_q[final], minlength=n).astype(np.float64)
        covered = np.bincount(batch.node_q[final & batch.gold], minlength=n) > 0
        # top-1: the final node with the smallest Eq. 6 score, then the smallest scored (first on ties)
        idx = np.flatnonzero(final)
        hit1 = np.zeros(n, dtype=bool)
        if idx.size:
            order = idx[np.lexsort((idx, scored[idx], batch.eq6[idx], batch.node_q[idx]))]
            q = batch.node_q[order]
            first = order[np.r_[True, q[1:] != q[:-1]]]
            hit1[batch.node_q[first]] = batch.gold[first]
        return {"covered": covered.astype(np.float64), "size": size, "hit1": hit1.astype(np.float64)}


def front_and_chain(losses: npt.ArrayLike, n: int, alpha: float, ltt: LTTConfig, tune_size: npt.ArrayLike,
                    largest: int, front: npt.ArrayLike, chain: npt.ArrayLike) -> LTTResult:
    """``order="front+chain"``: hypothesis ``largest`` (the λ whose set contains every other's) at δ; once
    it is rejected, the rest of the Pareto front (``front``, :func:`pareto_order` without ``largest``) and
    of the nested chain (``chain``, :func:`nested_chain` without it), each a fixed sequence at δ/2.
    Λ_valid is the union and λ̂ its smallest ``tune_size``. FWER ≤ δ: if the largest set's risk exceeds α
    so does every λ's (its set contains theirs), and a false rejection needs its own, probability ≤ δ;
    otherwise one needs a false rejection in either sequence, ≤ δ/2 each. ``losses`` and ``tune_size``
    are indexed like the hypotheses the three sequences name."""
    first = learn_then_test(losses, n, alpha, ltt, tune_size, [largest])
    if not first.valid.any():
        return first
    half = replace(ltt, delta=ltt.delta / 2)
    valid = first.valid.copy()
    for seq in (front, chain):
        if np.size(seq):
            valid |= learn_then_test(losses, n, alpha, half, tune_size, seq).valid
    size = np.asarray(tune_size, dtype=np.float64)
    idx = np.flatnonzero(valid)
    return LTTResult(valid, int(idx[np.argmin(size[idx])]), first.p_values, first.guaranteed)


def question_table(question: Question, retriever: UQRetriever, evaluator: UQEvaluator,
                   generation: str | None = None) -> QuestionTable:
    """Everything UAG needs about one question, threshold-free: retrieve every path up to ``max_hops``
    from the topic entities (Eq. 4–5 scores), obtain ``Φ(P)`` (``generation`` if given, else the
    evaluator's generator prompted with the best paths by Eq. 5 score), and score every candidate (Eq. 6).
    Gold flags come from ``question.gold`` (names, compared after :func:`normalise_label`). A question
    whose topic entities are not in the KG gets an empty table (its set is always empty)."""
    kg = retriever.kg
    topics = retriever.topic_nodes(question.topic_entities)
    none_i, none_f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    if not topics:
        return QuestionTable(question.id, none_i, none_f, none_f, none_f, none_i, none_f, np.zeros(0, bool))
    paths = retriever.paths(question.text, topics)
    if generation is None:
        generation = evaluator.generate(question.id, question.text, evaluator.prompt_paths(kg, paths))
    keep = np.flatnonzero(paths.candidate)
    nodes, local = np.unique(paths.node[keep], return_inverse=True)
    labels = [kg.label(int(n)) for n in nodes.tolist()]
    gold_names = {normalise_label(g) for g in question.gold}
    gold = np.asarray([normalise_label(x) in gold_names for x in labels], dtype=bool)
    eq6 = evaluator.scores(labels, generation)
    items = evaluator.scores(labels, generation, granularity="items")
    return QuestionTable(question.id, local.astype(np.int64), paths.prefix[keep], paths.expand[keep],
                         paths.collect[keep], nodes.astype(np.int64), eq6, gold, items)
