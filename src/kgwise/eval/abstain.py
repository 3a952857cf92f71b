"""``kgwise eval abstain``: abstention with a guarantee (:mod:`kgwise.conformal.selective`, the rule
``[answer_sets] abstain`` applies per routed arm) on recorded answers: the arm's own confidence, the
agreement-first confidence (:func:`kgwise.app.abstain.answer_confidence`) and the per-split choice
between them that the pipeline makes (:data:`RULES`), in the same splits.

An :class:`AnsweredLog` is one arm's answers: its confidence in each (the probability it gave its choice,
or a KG model's score of its top candidate), whether each was right, and how many *witnesses* — arms
whose answers the pipeline has before routing, free to ask — gave the same answer. Per split the questions
are shuffled into tuning (the rule's threshold grid and test order: the dev questions the router learns
from), calibration (the held-out questions that certify) and test parts; per α and rule, reported over the
splits: the share of test questions answered, the accuracy among them, the share of splits where that
accuracy is ≥ 1 − α (the guarantee says ≥ 1 − δ of calibration draws; a split answering nothing holds),
the share certified, and the *oracle* share (the most confident share of the whole log whose accuracy is
still ≥ 1 − α: what a rule knowing the truth could answer with that score).

Sources: WebQSP's recorded ReaRev GNN answers (``rearev-sbert`` and ``rearev-lmsr``, 1,639 questions: each
variant's witness is the other, as two free KG models of a pipeline), and a user's graded log
(:mod:`kgwise.datasets.user`; an arm's first signal is its top choice probability, the witnesses are the
log's free arms — cost 0 on every question).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.conformal.selective import SelectiveConfig, SelectiveRiskControl, choose_confidence
from kgwise.errors import ConfigError, DataError

__all__ = ["RULES", "AbstainEvalConfig", "AnsweredLog", "compare", "evaluate", "graded_log_arms",
           "oracle_share", "rearev_logs"]

RULES = ("own", "agreement", "chosen")
"""The confidences compared: the arm's own (the rule before agreement counted), agreement first, and the
one the tuning questions predict to answer more (per split, as the pipeline chooses per arm:
:func:`kgwise.conformal.selective.choose_confidence`)."""


@dataclass(frozen=True, slots=True)
class AbstainEvalConfig:
    """``tune`` and ``calibration``: questions per split in each part (the rest is the test part);
    ``splits``: seeded random shuffles (split ``s`` uses ``seed + s``)."""

    alphas: tuple[float, ...] = (0.1, 0.2, 0.3)
    delta: float = 0.05
    splits: int = 40
    tune: int = 300
    calibration: int = 300
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.alphas or any(not 0 < a < 1 for a in self.alphas):
            raise ConfigError(f"alphas must lie in (0, 1), got {list(self.alphas)}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"delta must lie in (0, 1), got {self.delta:g}")
        if self.splits < 1 or self.tune < 1 or self.calibration < 1:
            raise ConfigError(f"splits, tune and calibration must be ≥ 1, got {self.splits}, {self.tune}, "
                              f"{self.calibration}")


@dataclass(frozen=True)
class AnsweredLog:
    """One arm's recorded answers (module docstring): ``confidence`` in [0, 1], ``correct``, ``agreeing``
    (how many of ``witnesses`` gave the same answer)."""

    arm: str
    confidence: npt.NDArray[np.float64]
    correct: npt.NDArray[np.bool_]
    agreeing: npt.NDArray[np.int64]
    witnesses: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        n = self.confidence.size
        if self.correct.size != n or self.agreeing.size != n:
            raise ConfigError(f"{self.source}: arm {self.arm!r}: {n} confidences, {self.correct.size} "
                              f"verdicts, {self.agreeing.size} agreement counts")
        if n and (np.isnan(self.confidence).any() or self.confidence.min() < 0 or self.confidence.max() > 1):
            raise ConfigError(f"{self.source}: arm {self.arm!r}: a confidence outside [0, 1]")

    def score(self, rule: str) -> npt.NDArray[np.float64]:
        """The confidence ``own`` or ``agreement`` orders answers by."""
        if rule == "own":
            return self.confidence
        if rule == "agreement":
            return self.agreeing + self.confidence
        raise ConfigError(f"a score is 'own' or 'agreement', got {rule!r}")


def oracle_share(score: npt.NDArray[np.float64], correct: npt.NDArray[np.bool_], alpha: float) -> float:
    """The largest share of the questions, taken most confident first, whose accuracy is ≥ 1 − α."""
    order = np.argsort(-score, kind="stable")
    accuracy = np.cumsum(correct[order]) / np.arange(1, score.size + 1)
    good = np.flatnonzero(accuracy >= 1 - alpha)
    return float((good.max() + 1) / score.size) if good.size else 0.0


def compare(log: AnsweredLog, cfg: AbstainEvalConfig) -> dict[str, Any]:
    """The rules of :data:`RULES` on ``log`` over ``cfg.splits`` shuffles (module docstring); the oracle
    share of ``chosen`` is agreement's."""
    n = log.confidence.size
    if cfg.tune + cfg.calibration >= n:
        raise ConfigError(f"{log.source}: arm {log.arm!r} answered {n} questions; tuning {cfg.tune} + "
                          f"calibration {cfg.calibration} leave none to test")
    out: dict[str, Any] = {"arm": log.arm, "source": log.source, "questions": n,
                           "accuracy": float(log.correct.mean()), "witnesses": list(log.witnesses),
                           "agreement_share": float((log.agreeing > 0).mean()), "alphas": {}}
    for alpha in cfg.alphas:
        row: dict[str, Any] = {}
        config = SelectiveConfig(alpha=alpha, delta=cfg.delta)
        for rule in RULES:
            shares, accuracies, held, certified, agreeing = [], [], 0, 0, 0
            for s in range(cfg.splits):
                p = np.random.default_rng(cfg.seed + s).permutation(n)
                tune, cal = p[:cfg.tune], p[cfg.tune:cfg.tune + cfg.calibration]
                test = p[cfg.tune + cfg.calibration:]
                pick = rule
                if rule == "chosen":  # as the pipeline chooses: on the tuning questions and n alone
                    pick = "own" if not log.witnesses else choose_confidence(
                        {"own": log.score("own")[tune], "agreement": log.score("agreement")[tune]},
                        log.correct[tune], cfg.calibration, config)
                agreeing += pick == "agreement"
                c = log.score(pick)
                est = SelectiveRiskControl(config)
                answered = est.fit(c[tune], log.correct[tune]).conformalize(c[cal], log.correct[cal]).predict(
                    c[test])
                certified += est.certified
                shares.append(float(answered.mean()))
                if answered.any():
                    accuracies.append(float(log.correct[test][answered].mean()))
                held += not answered.any() or log.correct[test][answered].mean() >= 1 - alpha
            row[rule] = {"answered": float(np.mean(shares)), "answered_min": float(np.min(shares)),
                         "agreement_splits": agreeing / cfg.splits,
                         "accuracy_answered": float(np.mean(accuracies)) if accuracies else None,
                         "held_share": held / cfg.splits, "certified_share": certified / cfg.splits,
                         "oracle_share": oracle_share(log.score(rule if rule != "chosen" else "agreement"),
                                                      log.correct, alpha)}
        out["alphas"][f"{alpha:g}"] = row
    return out


def rearev_logs(data_dir: Path) -> list[AnsweredLog]:
    """WebQSP's two recorded ReaRev GNNs (module docstring), each witnessed by the other."""
    from kgwise.eval.recorded.gnn_rag import REAREV_TEST_INFO, read_test_info_candidates

    rows = {v: read_test_info_candidates(data_dir / path) for v, path in REAREV_TEST_INFO.items()}
    top = {v: [r.candidates[0][0] if r.candidates else None for r in rs] for v, rs in rows.items()}
    if len({len(t) for t in top.values()}) != 1:
        raise DataError("the ReaRev recordings hold different numbers of questions", data_dir)
    out = []
    for v, rs in rows.items():
        (other,) = [w for w in rows if w != v]
        agree = [a is not None and a == b for a, b in zip(top[v], top[other], strict=True)]
        right = [bool(r.candidates) and r.candidates[0][0] in r.answers for r in rs]
        out.append(AnsweredLog(v, np.asarray([r.candidates[0][1] if r.candidates else 0.0 for r in rs]),
                               np.asarray(right),
                               np.asarray(agree, dtype=np.int64), (other,), "webqsp (recorded ReaRev)"))
    return out


def graded_log_arms(path: Path, arms: Sequence[str] | None = None) -> list[AnsweredLog]:
    """Every arm of a graded log (or those named), its confidence its first signal (the top choice
    probability), witnessed by the log's free arms. An arm not in the log, or an answer without a signal,
    is refused naming the arm (and the first line concerned)."""
    from kgwise.datasets.user import read_graded_log

    log = read_graded_log(path)
    names = list(arms) if arms else list(log.arms)
    unknown = [a for a in names if a not in log.arms]
    if unknown:
        raise ConfigError(f"{path}: no arm {', '.join(map(repr, unknown))} in the log (arms: "
                          f"{', '.join(log.arms)})")
    free = [a for a in log.arms  # costs nothing on every row: no cost and no usage to price
            if all(o is None or (o.usage is None and (o.cost or 0.0) == 0.0) for o in log.outcome(a))]
    out = []
    for a in names:
        rows = [(k, o) for k, o in enumerate(log.outcome(a)) if o is not None]  # ≥ 1: the log names it
        bare = [k for k, o in rows if not o.signals]
        if bare:
            raise ConfigError(f"{path}:{bare[0] + 1}: arm {a!r} has no signals (its top choice probability "
                              f"first) on {len(bare)} of its {len(rows)} answers")
        witnesses = tuple(w for w in free if w != a)
        agree = [sum(log.questions[k].arms.get(w) is not None and log.questions[k].arms[w].answer == o.answer
                     for w in witnesses) for k, o in rows]
        out.append(AnsweredLog(a, np.asarray([o.signals[0] for _, o in rows], dtype=np.float64),
                               np.asarray([o.correct for _, o in rows], dtype=bool),
                               np.asarray(agree, dtype=np.int64), witnesses, str(path)))
    return out


def evaluate(logs: Sequence[AnsweredLog], cfg: AbstainEvalConfig,
             progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """:func:`compare` on each log, with the configuration; each arm's line as it finishes."""
    results = []
    for log in logs:
        r = compare(log, cfg)
        results.append(r)
        progress(f"{r['arm']} (accuracy {r['accuracy']:.3f}): " + "; ".join(
            f"α={a}: " + ", ".join(f"{rule} answers {x['answered']:.3f} (held {x['held_share']:.2f})"
                                   for rule, x in row.items()) for a, row in r["alphas"].items()))
    return {"config": {"alphas": list(cfg.alphas), "delta": cfg.delta, "splits": cfg.splits, "tune": cfg.tune,
                       "calibration": cfg.calibration, "seed": cfg.seed}, "arms": results}
