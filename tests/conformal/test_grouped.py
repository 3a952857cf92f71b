"""GroupedUAG: LTT re-run on a group of calibration questions from stored misses equals UAG's own
calibration on that group's tables (real WebQSP tables, RoG's recorded generations)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.conformal.calibrated import UAG_DEFAULTS
from kgwise.conformal.grid import TableBatch
from kgwise.conformal.grouped import GroupedUAG
from kgwise.conformal.uag import UAG, UAGConfig
from kgwise.errors import ConfigError

TUNE = 120


def _config(alpha: float) -> UAGConfig:
    return replace(UAG_DEFAULTS, alpha=alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=0.1), order="front+chain")


@pytest.fixture(scope="module")
def grouped(webqsp_uag_tables: TableBatch) -> tuple[GroupedUAG, TableBatch]:
    tables = webqsp_uag_tables
    uag = UAG(_config(0.2)).fit(tables.subset(np.arange(TUNE)))
    cal = tables.subset(np.arange(TUNE, tables.num_questions))
    return GroupedUAG.from_fit(uag, cal), cal


def _direct(g: GroupedUAG, cal: TableBatch, rows: np.ndarray) -> UAG:
    return UAG(g.uag.config).adopt_fit(g.uag).calibrate(cal.subset(rows))


def test_every_calibration_question_gives_uag_s_own_calibration(
        grouped: tuple[GroupedUAG, TableBatch]) -> None:
    g, cal = grouped
    rows = np.arange(len(g))
    got, want = g.certify(rows), _direct(g, cal, rows)
    assert got is not None and not want.abstains, "180 WebQSP questions certify α = 0.2"
    assert got.lambda_ == want.lambda_ and got.evaluator_score_ == want.evaluator_score_
    assert got.chosen_thresholds_ == want.chosen_thresholds_
    assert g.misses.sum(axis=0).tolist() == g.uag.loss_counts(cal)[g.tested].tolist()


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_any_group_gives_uag_s_calibration_on_that_group(grouped: tuple[GroupedUAG, TableBatch],
                                                         data: st.DataObject) -> None:
    g, cal = grouped
    keep = data.draw(st.lists(st.booleans(), min_size=len(g), max_size=len(g)))
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        assert g.certify(rows) is None
        return
    got, want = g.certify(rows), _direct(g, cal, rows)
    assert (got is None) == want.abstains
    if got is not None:
        assert got.lambda_ == want.lambda_ and got.chosen_thresholds_ == want.chosen_thresholds_


def test_a_group_too_small_for_alpha_and_delta_certifies_nothing(
        grouped: tuple[GroupedUAG, TableBatch]) -> None:
    g, _ = grouped
    assert g.certify([0, 1, 2]) is None  # three questions cannot reject E[miss] > 0.2 at δ = 0.1


def test_saved_and_loaded_it_certifies_the_same(grouped: tuple[GroupedUAG, TableBatch]) -> None:
    g, cal = grouped
    back = GroupedUAG.from_dict(json.loads(json.dumps(g.to_dict())))
    assert np.array_equal(back.misses, g.misses) and np.array_equal(back.tested, g.tested)
    for rows in (np.arange(len(g)), np.arange(0, len(g), 2), np.arange(1, len(g), 3)):
        a, b = g.certify(rows), back.certify(rows)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert a.lambda_ == b.lambda_ and a.chosen_thresholds_ == b.chosen_thresholds_
            table = cal.table(int(rows[0]))
            assert a.predict_set(table).tolist() == b.predict_set(table).tolist()


def test_it_needs_the_front_and_chain_order(webqsp_uag_tables: TableBatch) -> None:
    tables = webqsp_uag_tables
    uag = UAG(replace(_config(0.2), order="front")).fit(tables.subset(np.arange(40)))
    with pytest.raises(ConfigError, match="front\\+chain"):
        GroupedUAG.from_fit(uag, tables.subset(np.arange(40, 80)))


def test_another_alpha_certifies_as_uag_calibrated_at_that_alpha(
        grouped: tuple[GroupedUAG, TableBatch]) -> None:
    g, cal = grouped
    rows = np.arange(0, len(g), 2)
    got = g.certify(rows, 0.3)
    want = UAG(_config(0.3)).adopt_fit(g.uag).calibrate(cal.subset(rows))
    assert got is not None and not want.abstains and got.config.alpha == 0.3
    assert got.lambda_ == want.lambda_ and got.chosen_thresholds_ == want.chosen_thresholds_


def test_the_largest_set_misses_no_question_a_certified_set_covers(
        grouped: tuple[GroupedUAG, TableBatch]) -> None:
    g, cal = grouped
    largest = g.largest()
    assert largest.index_ == g.uag.largest_index
    every = g.certify(np.arange(len(g)))
    assert every is not None and every.index_ != largest.index_
    big, small = (u.evaluate(cal) for u in (largest, every))
    assert np.all(big["covered"] >= small["covered"]) and np.all(big["size"] >= small["size"])
    assert g.miss_rate(np.arange(len(g)), largest) == pytest.approx(1 - big["covered"].mean())
