"""The one door of every replay: a graded log (:mod:`kgwise.datasets.user`) → what ``kgwise eval route`` and
``kgwise eval pipeline`` replay. The built-in WebQSP arms enter through it too: their recorded outcomes are
first written as a graded log (:func:`kgwise.eval.route.export.webqsp_graded_log`), so a user's log and the
benchmark are read by the same code and a log of the same outcomes gives the same report.

What each field of a log feeds (``docs/graded-logs.md``):

* ``correct`` and ``cost`` (or ``usage``, priced by the arm's exact name, :meth:`PriceTable.require`): the
  outcome table (:class:`~kgwise.route.table.OutcomeTable`) every router and baseline replays.
* A *free arm* is one that costs 0 on every question (a local KG model): it answers every question before
  any paid call, and its outcome is observed by the router at no cost. Its ``answer`` and ``signals[0]``
  (its confidence in that answer) make the router's free context
  (:func:`~kgwise.route.table.free_signal_row`: whether the free arms agree, their confidences, agreement ×
  the smallest), which ``--context question+free`` / ``free`` and ``eval route``'s context variants read.
* Every ``signals`` value of every arm that has them (padded with 0 to the arm's longest list), with the
  free arms' agreement and the question's form (:func:`question_form`), makes the success predictor's
  features (:mod:`kgwise.route.predictor`): a paid arm's signals are its own confidence, known once it
  has been called — what a cascade reads after asking the cheap arm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.datasets.user import GradedLog
from kgwise.errors import ConfigError
from kgwise.llm.prices import PriceTable, default_prices
from kgwise.route.arms import ArmSpec, Cluster
from kgwise.route.features import FORM_NAMES, question_form
from kgwise.route.table import OutcomeTable, free_signal_row, graded_coverage
from kgwise.types import Usage

__all__ = ["FreeAnswers", "GradedReplay", "arm_lines", "graded_replay", "question_form", "webqsp_replay"]

Matrix = npt.NDArray[np.float64]
FreeAnswers = tuple[Sequence[str], Sequence[float] | Matrix]
"""A free arm's top answer (``""``: none) and its first signal on each question of an outcome table."""

@dataclass(frozen=True)
class GradedReplay:
    """A graded log read for replay: the outcome table over the chosen arms; the coverage report
    (questions some arm did not grade are counted and named); per free arm with answers or signals, its
    answer and first signal per row (:data:`FreeAnswers`); the free context rows
    (``[agree, s_1 … s_k, agree · min s]``, ``None`` without free arms); and the success predictor's
    features (module docstring)."""

    table: OutcomeTable
    coverage: dict[str, Any]
    free: dict[str, FreeAnswers] = field(default_factory=dict)
    signals: Matrix | None = None
    features: Matrix | None = None
    feature_names: tuple[str, ...] = ()
    free_signals: dict[str, tuple[tuple[float, ...], ...]] = field(default_factory=dict)
    """Per free arm, every value of its ``signals`` on each row (what the ``predicted`` context reads)."""

    @property
    def free_arms(self) -> list[str]:
        return list(self.free)

    def head(self, n: int | None) -> GradedReplay:
        """The first ``n`` questions (all when ``n`` is None or not smaller)."""
        if n is None or n >= self.table.n_questions:
            return self
        free: dict[str, FreeAnswers] = {a: (list(top[:n]), np.asarray(s, dtype=np.float64)[:n])
                                        for a, (top, s) in self.free.items()}
        return GradedReplay(self.table.head(n), self.coverage, free,
                            None if self.signals is None else self.signals[:n],
                            None if self.features is None else self.features[:n], self.feature_names,
                            {a: s[:n] for a, s in self.free_signals.items()})


def arm_lines(specs: Sequence[str]) -> list[ArmSpec]:
    """``--arm NAME:CLUSTER[:REPORTED_ACCURACY]`` options (the name may hold ':', read from the right)."""
    if not specs:
        raise ConfigError("--log needs --arm NAME:CLUSTER:ACCURACY for each arm to replay")
    out: list[ArmSpec] = []
    for spec in specs:
        parts = spec.rsplit(":", 2)
        if len(parts) == 3 and parts[1] not in ("KGM", "LLM"):
            parts = [f"{parts[0]}:{parts[1]}", parts[2]]
        if len(parts) < 2 or not parts[0] or parts[1] not in ("KGM", "LLM"):
            raise ConfigError(f"--arm {spec!r}: expected NAME:CLUSTER[:REPORTED_ACCURACY], CLUSTER = KGM or "
                              "LLM")
        try:
            reported = float(parts[2]) if len(parts) == 3 else None
        except ValueError as exc:
            raise ConfigError(f"--arm {spec!r}: reported accuracy {parts[2]!r} is not a number") from exc
        cluster: Cluster = "KGM" if parts[1] == "KGM" else "LLM"
        out.append(ArmSpec(parts[0], cluster, reported))
    names = [a.name for a in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--arm given twice: {', '.join(twice)}")
    return out


def graded_replay(log: GradedLog, arms: Sequence[ArmSpec], source: str,
                  prices: PriceTable | None = None) -> GradedReplay:
    """The replay of ``log`` over ``arms`` (module docstring); ``source``: the log's name in the coverage
    report and in errors. An arm's ``usage`` is priced by the arm's exact name in ``prices`` (default:
    the bundled table or ``$KGWISE_PRICES``); an unlisted one is an error naming it."""
    table_prices = prices or default_prices()

    def cost_of(arm: str, usage: Usage) -> float:
        price = table_prices.require(arm, f"arm {arm!r} of {source} gives usage, not cost")
        return float(price.cost(usage.input_tokens, usage.output_tokens))

    table = OutcomeTable.from_graded_log(log, arms, "$", cost_of)
    coverage: dict[str, Any] = {"log": source, **graded_coverage(log, table.arms)}
    by_id = {q.id: q for q in log.questions}
    rows = [by_id[q] for q in table.qids]
    free_cols = table.free_columns
    free: dict[str, FreeAnswers] = {}
    free_all: dict[str, tuple[tuple[float, ...], ...]] = {}
    for j in free_cols:
        name = table.arms[j]
        outs = [q.arms[name] for q in rows]
        if any(o.signals or o.answer for o in outs):
            free[name] = ([o.answer for o in outs],
                          np.asarray([o.signals[0] if o.signals else 0.0 for o in outs], dtype=np.float64))
            free_all[name] = tuple(tuple(float(v) for v in o.signals) for o in outs)
    signals = None
    if free:
        signals = np.asarray([free_signal_row([(top[i], float(s[i])) for top, s in free.values()])
                              for i in range(table.n_questions)], dtype=np.float64)
    features, names = _features(rows, table, signals, list(free))
    return GradedReplay(table, coverage, free, signals, features, names, free_all)


def _features(rows: Sequence[Any], table: OutcomeTable, signals: Matrix | None, free_arms: list[str]
              ) -> tuple[Matrix, tuple[str, ...]]:
    """The success predictor's features per row: every arm's signals (padded with 0; ``ARM.signal[k]``),
    the free context row (``free.*``) and the question's form (``form.*``)."""
    cols: list[Matrix] = []
    names: list[str] = []
    for name in table.arms:
        width = max(len(q.arms[name].signals) for q in rows)
        if not width:
            continue
        block = np.zeros((len(rows), width))
        for i, q in enumerate(rows):
            s = q.arms[name].signals
            block[i, :len(s)] = s
        cols.append(block)
        names += [f"{name}.signal[{k}]" for k in range(width)]
    if signals is not None:
        cols.append(signals)
        names += ["free.agree", *(f"free.{a}.score" for a in free_arms), "free.agree*min"]
    form = np.asarray([question_form(t) for t in table.texts], dtype=np.float64).reshape(len(rows), -1)
    cols.append(form)
    names += list(FORM_NAMES)
    return np.hstack(cols), tuple(names)


def read_replay(path: Path, specs: Sequence[str]) -> GradedReplay:
    """A user's graded log file over ``--arm`` specs (:func:`arm_lines`)."""
    from kgwise.datasets.user import read_graded_log

    return graded_replay(read_graded_log(path), arm_lines(specs), str(path))


def webqsp_replay(data: Path, arms: Sequence[str] | None = None) -> GradedReplay:
    """WebQSP's recorded arms (:data:`~kgwise.eval.route.replay.MAIN_ARMS`) through the same door: their
    graded log (:func:`~kgwise.eval.route.export.webqsp_graded_log`), read by :func:`graded_replay`; the
    coverage report adds how the recorded files were aligned."""
    from kgwise.eval.route.export import webqsp_graded_log
    from kgwise.eval.route.replay import MAIN_ARMS

    log, lines, aligned = webqsp_graded_log(data, arms or MAIN_ARMS)
    replay = graded_replay(log, [ArmSpec(n, "KGM" if c == "KGM" else "LLM", a) for n, c, a in lines],
                           "webqsp (recorded arms)")
    replay.coverage["recorded"] = aligned
    return replay
