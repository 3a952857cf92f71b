"""``RoutedSets``: UAG's sets of replayed open answers, calibrated on the fit rows, scored per routed arm."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.app.config import OpenUncertified
from kgwise.conformal.calibrated import UAG_DEFAULTS, TableSettings, calibrate_uag
from kgwise.conformal.grid import TableBatch
from kgwise.conformal.uag import UAG
from kgwise.errors import ConfigError
from kgwise.eval.pipeline_sets import RoutedSets, summarise_sets


def test_sets_are_calibrated_on_the_fit_rows_and_scored_per_routed_arm(webqsp_uag_tables: TableBatch) -> None:
    tables = webqsp_uag_tables
    n = tables.num_questions + 2  # two outcome rows without a table: no set, counted
    rows = np.concatenate([np.arange(tables.num_questions), [-1, -1]]).astype(np.int64)
    rows[[3, n - 1]] = rows[[n - 1, 3]]  # one of them among the fit rows
    fit, test = list(range(170)), list(range(170, n))
    routed: list[str | None] = [("gnn" if i % 3 else "llm") for i in test]
    routed[5] = None  # budget spent: answered by no arm
    sets = RoutedSets(tables, rows, alphas=(0.2, 0.3), delta=0.05)
    out = sets.split(fit, test, routed, ["gnn", "llm", "unused"], seed=4)
    assert out["calibration_questions"] == 169 and out["fit_without_table"] == 1
    assert out["test_without_table"] == 1
    fit_t = rows[fit][rows[fit] >= 0]
    for alpha, row in zip((0.2, 0.3), out["alphas"], strict=True):
        uag = _calibrated(tables, fit_t, alpha)
        assert row["certified"] == (not uag.abstains)
        assert row["certified"], f"300 WebQSP questions certify α = {alpha}"
        assert set(row["arms"]) == {"gnn", "llm"}  # an arm routed nothing has no entry
        scored = 0
        for arm, got in row["arms"].items():
            mine = [rows[i] for i, a in zip(test, routed, strict=True) if a == arm and rows[i] >= 0]
            m = uag.evaluate(tables.subset(np.asarray(mine)))
            assert got["questions"] == len(mine)
            assert got["coverage"] == pytest.approx(m["covered"].mean())
            assert got["mean_size"] == pytest.approx(m["size"].mean())
            assert got["on_target"] == (1 - m["covered"].mean() <= alpha)
            scored += len(mine)
        assert row["questions"] == len(test) - 1 and scored == row["questions"] - 1  # the unrouted one


def _calibrated(tables: TableBatch, rows: npt.NDArray[np.int64], alpha: float) -> UAG:
    cfg = replace(UAG_DEFAULTS, alpha=alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=0.05), order="front+chain")
    return calibrate_uag(tables.subset(rows), cfg, TableSettings(), 0.4, 4)[0]


def _of(rows: list[int], arms: list[str | None], arm: str) -> npt.NDArray[np.int64]:
    return np.asarray([i for i, a in zip(rows, arms, strict=True) if a == arm], dtype=np.int64)


def test_per_arm_sets_calibrate_on_the_fit_rows_an_out_of_fold_router_sent_to_that_arm(
        webqsp_uag_tables: TableBatch) -> None:
    tables = webqsp_uag_tables
    rows = np.arange(tables.num_questions, dtype=np.int64)
    fit, test = list(range(200)), list(range(200, 300))
    fit_groups: list[str | None] = ["big" if i % 4 else "small" for i in fit]  # "small": 50 rows
    fit_groups[1] = None
    routed: list[str | None] = ["big" if i % 4 else "small" for i in test]
    out = RoutedSets(tables, rows, alphas=(0.3,)).split(fit, test, routed, ["big", "small"], 4, fit_groups)
    per = out["alphas"][0]["per_arm"]
    assert per["big"]["calibration_questions"] == 149 and per["small"]["calibration_questions"] == 50
    assert per["big"]["certified"], "149 WebQSP questions certify α = 0.3"
    for arm, got in per.items():
        uag = _calibrated(tables, _of(fit, fit_groups, arm), 0.3)
        assert got["certified"] == (not uag.abstains)
        if got["certified"]:
            m = uag.evaluate(tables.subset(_of(test, routed, arm)))
            assert got["coverage"] == pytest.approx(m["covered"].mean())
            assert got["questions"] == m["covered"].size
    few = RoutedSets(tables, rows, alphas=(0.3,)).split(fit, test, routed, ["big", "small"], 4,
                                                       ["big"] * 199 + ["small"])
    assert few["alphas"][0]["per_arm"]["small"] == {"calibration_questions": 1, "certified": False,
                                                    "lambda": None}


@pytest.mark.parametrize("uncertified", ["largest", "pooled"])
def test_held_out_sets_are_certified_per_answer_on_the_held_rows_sent_to_its_arm(
        webqsp_uag_tables: TableBatch, uncertified: OpenUncertified) -> None:
    """The pipeline's calibration: tuned on the learn rows; each test question's λ certified on the held
    rows its group sends to its arm, else (fallback) UAG's largest set or the λ certified on every held
    row — recomputed here with ``calibrate_uag`` on exactly those rows."""
    tables = webqsp_uag_tables
    rows = np.arange(tables.num_questions, dtype=np.int64)
    learn, held, test = list(range(80)), list(range(80, 250)), list(range(250, 300))
    arms = ["big", "small"]
    many = np.asarray([0 if k % 5 else 1 for k in range(len(held))], dtype=np.int64)  # "small": 34 rows
    groups = [many if k % 4 == 3 else np.zeros(len(held), dtype=np.int64) for k in range(len(test))]
    routed: list[str | None] = [arms[k % 2] for k in range(len(test))]
    routed[4] = None  # not answered
    out = RoutedSets(tables, rows, alphas=(0.3,), calibration="held-out", uncertified=uncertified
                     ).split_held_out(learn, held, test, routed, groups, arms)
    assert (out["tuning_questions"], out["calibration_questions"]) == (80, 170)
    row = out["alphas"][0]
    assert row["certified"] and row["questions"] == len(test) - 1
    cfg = replace(UAG_DEFAULTS, alpha=0.3, ltt=replace(UAG_DEFAULTS.ltt, delta=0.05), order="front+chain")

    def certified_on(cal: list[int]) -> UAG:
        both = tables.subset(np.asarray(learn + cal))
        return calibrate_uag(both, cfg, TableSettings(), split=(range(80), range(80, 80 + len(cal))))[0]

    every = certified_on(held)
    fallback = every if uncertified == "pooled" else UAG(cfg).adopt_fit(every).choose(every.largest_index)
    covered, fell = [], []
    for k, (t, arm) in enumerate(zip(test, routed, strict=True)):
        if arm is None:
            continue
        mine = [h for h, g in zip(held, groups[k], strict=True) if g == arms.index(arm)]
        u = certified_on(mine) if mine else every
        fell.append(u.abstains or not mine)
        u = fallback if u.abstains or not mine else u
        covered.append(bool(u.evaluate(tables.subset(np.asarray([t])))["covered"][0]))
    assert row["coverage"] == pytest.approx(np.mean(covered))
    assert row["fallback"] == pytest.approx(np.mean(fell))
    assert 0 < row["fallback"] < 1, "'small' answers whose group sends it nothing fall back"
    assert set(row["arms"]) == {"big", "small"}


def _run(per_alpha: list[dict[str, Any]]) -> dict[str, Any]:
    return {"answer_sets": {"alphas": per_alpha}}


def _arm(cov: float, below: bool = False) -> dict[str, Any]:
    return {"questions": 10, "coverage": cov, "mean_size": 2.0, "on_target": cov >= 0.9,
            "below_beyond_noise": below}


def test_the_summary_counts_each_arm_over_the_splits_it_was_routed_in() -> None:
    runs = [_run([{"certified": True, "coverage": 0.92, "mean_size": 2.0,
                   "arms": {"a": _arm(0.95), "b": _arm(0.8, below=True)}}]),
            _run([{"certified": True, "coverage": 0.9, "mean_size": 3.0, "arms": {"a": _arm(0.9)}}]),
            _run([{"certified": False}])]
    s = summarise_sets(runs, ["a", "b", "c"], [0.1])["0.1"]
    assert s["splits"] == 3 and s["certified"] == 2
    assert s["coverage"] == pytest.approx(0.91) and s["mean_size"] == pytest.approx(2.5)
    assert s["every_arm_on_target"] == pytest.approx(0.5)
    assert s["no_arm_below_beyond_noise"] == pytest.approx(0.5)
    assert s["arms"]["a"]["splits"] == 2 and s["arms"]["a"]["on_target"] == 1.0
    assert s["arms"]["b"]["splits"] == 1 and s["arms"]["b"]["below_beyond_noise"] == 1.0
    assert "c" not in s["arms"] and "per_arm" not in s


def test_an_arm_without_a_per_arm_set_is_not_on_target() -> None:
    uncertified = {"calibration_questions": 3, "certified": False, "lambda": None}
    runs = [_run([{"certified": True, "coverage": 0.92, "mean_size": 2.0, "arms": {"a": _arm(0.95)},
                   "per_arm": {"a": {"certified": True, **_arm(0.93)}, "b": uncertified}}]),
            _run([{"certified": True, "coverage": 0.92, "mean_size": 2.0, "arms": {"a": _arm(0.95)},
                   "per_arm": {"a": {"certified": True, **_arm(0.91)}}}])]
    per = summarise_sets(runs, ["a", "b"], [0.1])["0.1"]["per_arm"]
    assert per["every_routed_arm_certified"] == 0.5 and per["every_arm_on_target"] == 0.5
    assert per["certified"] == {"a": 1.0, "b": 0.0}
    assert per["arms"]["a"]["coverage"] == pytest.approx(0.92) and "b" not in per["arms"]


def test_bad_levels_and_rows_are_refused(webqsp_uag_tables: TableBatch) -> None:
    rows = np.arange(4, dtype=np.int64)
    with pytest.raises(ConfigError, match="α"):
        RoutedSets(webqsp_uag_tables, rows, alphas=(0.1, 1.0))
    with pytest.raises(ConfigError, match="δ"):
        RoutedSets(webqsp_uag_tables, rows, delta=0.0)
    with pytest.raises(ConfigError, match="table row"):
        RoutedSets(webqsp_uag_tables, np.asarray([webqsp_uag_tables.num_questions]))
    with pytest.raises(ConfigError, match="calibration must be one of held-out, fit-half"):
        RoutedSets(webqsp_uag_tables, rows, calibration="per-arm")
