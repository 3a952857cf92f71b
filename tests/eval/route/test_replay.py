"""The WebQSP replay table on the real recorded outcomes: alignment, coverage, costs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.eval.route.logs import webqsp_replay
from kgwise.eval.route.replay import (
    MAIN_ARMS,
    WEBQSP_ARMS,
    rearev_candidates,
    webqsp_table,
)
from kgwise.llm.prices import default_prices
from kgwise.route.table import OutcomeTable


def test_main_table(data_dir: Path) -> None:
    table, cov = webqsp_table(data_dir, MAIN_ARMS)
    assert cov["dataset_questions"] == 1_639 and cov["with_gold_names"] == 1_581
    assert table.n_questions == cov["covered_by_all_arms"] >= 1_570
    assert table.arms == MAIN_ARMS and table.clusters[:2] == ("KGM", "KGM")
    acc = dict(zip(table.arms, table.correct.mean(axis=0), strict=True))
    assert 0.75 < acc["ReaRev-lmsr"] < 0.85 and 0.8 < acc["RoG-GNN"] < 0.95
    assert np.all(table.cost[:, :2] == 0) and np.all(table.cost[:, 2:] > 0)
    # AoG tokens are recorded: the first aligned AoG question costs exactly its tokens at qwen3-max prices
    price = default_prices().lookup("qwen3-max")
    assert price is not None
    i = table.qids.index("WebQTest-713")  # "what county is st. louis park in?" (AoG: 4621 in, 284 out)
    assert table.cost[i, table.arm_index("Qwen3-max-AoG")] == pytest.approx(price.cost(4621, 284))
    assert cov["arms"]["Qwen3-max-AoG"]["tokens"] == "recorded"


def _tops(data_dir: Path, table: OutcomeTable, arm: str) -> tuple[list[str], np.ndarray]:
    top = [c[0] if c else ("", 0.0) for c in rearev_candidates(data_dir, table, arm)]
    return [t[0] for t in top], np.asarray([t[1] for t in top])


def test_rearev_top_score_is_aligned_with_its_hits(data_dir: Path) -> None:
    """The GNN's top score per question: its most confident third is right more often than its least."""
    table, _ = webqsp_table(data_dir, MAIN_ARMS)
    _, conf = _tops(data_dir, table, "ReaRev-lmsr")
    assert conf.shape == (table.n_questions,) and np.all((conf >= 0) & (conf <= 1))
    hits = table.correct[:, table.arm_index("ReaRev-lmsr")]
    order = np.argsort(conf, kind="stable")
    third = len(order) // 3
    assert hits[order[-third:]].mean() > hits[order[:third]].mean() + 0.05


def test_free_gnn_signals_agree_with_the_two_top_candidates(data_dir: Path) -> None:
    """Agreement of the two ReaRev GNNs (the replay's free context): where both hits differ they cannot
    agree; agreeing answers are right more often than either GNN on average."""
    replay = webqsp_replay(data_dir)
    table, sig = replay.table, replay.signals
    assert sig is not None
    ids_l, conf_l = _tops(data_dir, table, "ReaRev-lmsr")
    ids_s, _ = _tops(data_dir, table, "ReaRev-sbert")
    agree = sig[:, 0].astype(bool)
    assert agree.tolist() == [a == b and a != "" for a, b in zip(ids_l, ids_s, strict=True)]
    np.testing.assert_allclose(sig[:, 1], conf_l)
    np.testing.assert_allclose(sig[:, 3], np.where(agree, np.minimum(sig[:, 1], sig[:, 2]), 0.0))
    hit_l = table.correct[:, table.arm_index("ReaRev-lmsr")]
    hit_s = table.correct[:, table.arm_index("ReaRev-sbert")]
    assert not (agree & (hit_l != hit_s)).any()  # same top candidate, same hit
    assert 0.3 < agree.mean() < 0.9 and hit_l[agree].mean() > hit_l.mean() + 0.05


def test_gpt4_subset(data_dir: Path) -> None:
    table, cov = webqsp_table(data_dir, WEBQSP_ARMS)
    assert "GPT-4" in table.arms
    assert 150 < table.n_questions <= cov["arms"]["GPT-4"]["aligned_with_gold"] < 499
    with pytest.raises(ConfigError):
        webqsp_table(data_dir, ("nope",))
