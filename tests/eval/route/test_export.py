"""The WebQSP recorded outcomes exported as a graded log replay to the same table and signals."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgwise.datasets.user import read_graded_log, write_graded_log
from kgwise.eval.route.export import webqsp_graded_log
from kgwise.eval.route.replay import webqsp_table
from kgwise.route.arms import Cluster
from kgwise.route.table import OutcomeTable, graded_coverage


@dataclass(frozen=True)
class _Arm:
    name: str
    cluster: Cluster
    reported_accuracy: float | None


def test_exported_log_gives_the_replay_table(data_dir: Path, tmp_path: Path) -> None:
    log, arms, _ = webqsp_graded_log(data_dir)
    path = tmp_path / "log.jsonl"
    write_graded_log(path, log)
    back = read_graded_log(path)
    table = OutcomeTable.from_graded_log(back, [_Arm(n, c, a) for n, c, a in arms])  # type: ignore[arg-type]
    ref, _ = webqsp_table(data_dir)
    assert table.qids == ref.qids and table.arms == ref.arms and table.clusters == ref.clusters
    assert np.array_equal(table.correct, ref.correct) and np.array_equal(table.cost, ref.cost)
    assert graded_coverage(back, list(table.arms))["left_out"] == 0
