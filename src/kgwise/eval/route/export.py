"""The recorded WebQSP outcomes as a graded log (:mod:`kgwise.datasets.user`), so the benchmark goes through
the same path as a user's own log (``kgwise data export --dataset webqsp --log …``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgwise.datasets import load
from kgwise.datasets.user import ArmOutcome, GradedLog, GradedQuestion
from kgwise.errors import ConfigError
from kgwise.eval.route.replay import MAIN_ARMS, load_webqsp_records, rearev_top, webqsp_table
from kgwise.llm.prices import PriceTable, default_prices

__all__ = ["ArmLine", "webqsp_graded_log"]

ArmLine = tuple[str, str, float]
"""An arm as ``eval route --arm`` takes it: name, cluster, reported accuracy."""


def webqsp_graded_log(data: Path, arms: Sequence[str] = MAIN_ARMS, prices: PriceTable | None = None
                      ) -> tuple[GradedLog, list[ArmLine]]:
    """The questions of :func:`~kgwise.eval.route.replay.webqsp_table` (gold names, covered by every arm)
    with each arm's recorded answer, verdict and dollar cost; a ReaRev GNN's answer is its top candidate
    and its ``signals`` that candidate's score. Also each arm's cluster and its accuracy over its whole file
    (the Thompson priors ``eval route`` uses)."""
    table_prices = prices or default_prices()
    table, _ = webqsp_table(data, arms, table_prices)
    records = {r.name: r for r in load_webqsp_records(data, load("webqsp", "test", data), arms)}
    tops = {a: rearev_top(data, table, a) for a in arms if a.startswith("ReaRev-")}
    out = []
    for i, qid in enumerate(table.qids):
        graded = {}
        for j, name in enumerate(table.arms):
            rec = records[name]
            cost = float(table.cost[i, j])
            if name in tops:
                ids, scores = tops[name]
                graded[name] = ArmOutcome(ids[i], bool(table.correct[i, j]), cost, None, (float(scores[i]),))
            else:
                graded[name] = ArmOutcome(rec.outcomes[qid].prediction, bool(table.correct[i, j]), cost)
        out.append(GradedQuestion(qid, table.texts[i], graded))
    if not out:
        raise ConfigError("no WebQSP question to export")
    lines: list[ArmLine] = [(name, str(records[name].cluster), records[name].reported_accuracy)
                            for name in table.arms]
    return GradedLog(tuple(out), tuple(table.arms)), lines
