"""The learned candidate score: split-conformal coverage on exchangeable synthetic questions, fitted only
on the tuning rows, the same set alone as in a batch, saved and loaded; on a WebQSP slice."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kgwise.conformal.calibrated import CalibratedUAG, TableSettings, calibrate_uag
from kgwise.conformal.grid import EVALUATOR_SCORES, QuestionTable, TableBatch
from kgwise.conformal.grouped import GroupedUAG
from kgwise.conformal.learned import FEATURES, LogisticCandidateScore, candidate_features
from kgwise.conformal.ltt import LTTConfig
from kgwise.conformal.scores import (
    CANDIDATE_SCORES,
    CandidateScoreRule,
    candidate_score,
    register_candidate_score,
)
from kgwise.conformal.split import conformal_quantile
from kgwise.conformal.uag import CROSS_FIT_FOLDS, UAG, UAGConfig, size_thresholds, with_chains
from kgwise.errors import ConfigError


def synthetic_question(rng: np.random.Generator, qid: str) -> QuestionTable:
    """One question: 20–80 candidates, one gold; each candidate reached by 1–3 path states. The gold
    candidate's path and Eq. 6 scores are drawn lower on average, so the features carry signal but
    overlap (every question's gold is retrievable: the sets' coverage is all split conformal's)."""
    n = int(rng.integers(20, 81))
    gold = np.zeros(n, dtype=bool)
    gold[int(rng.integers(n))] = True
    shift = np.where(gold, -0.25, 0.0)
    per = rng.integers(1, 4, size=n)
    node = np.repeat(np.arange(n), per)
    collect = rng.uniform(0.3, 1.2, node.size) + shift[node]
    expand = collect + rng.uniform(0.0, 0.1, node.size)
    prefix = expand - rng.uniform(0.0, 0.1, node.size)
    eq6 = rng.uniform(0.2, 1.2, n) + 1.5 * shift
    items = eq6 + rng.normal(0.0, 0.1, n)
    return QuestionTable(qid, node.astype(np.int64), prefix, expand, collect, np.arange(n, dtype=np.int64),
                         eq6, gold, items)


def synthetic(rng: np.random.Generator, n: int, tag: str = "q") -> TableBatch:
    return TableBatch.from_tables([synthetic_question(rng, f"{tag}{i}") for i in range(n)])


def best_gold(batch: TableBatch, scores: np.ndarray) -> np.ndarray:
    """Per question, the smallest score of a gold candidate (split CP's non-conformity of the question)."""
    out = np.full(batch.num_questions, np.inf)
    np.minimum.at(out, batch.node_q[batch.gold], scores[batch.gold])
    return out


def test_split_conformal_with_the_learned_score_covers_1_minus_alpha() -> None:
    """Fitted on a tuning split, thresholded at Eq. 1's quantile of a disjoint calibration split: over
    fresh exchangeable draws the test coverage averages ≥ 1 − α (and ≤ 1 − α + 1/(n+1)), within three
    standard errors of the mean over draws."""
    rng = np.random.default_rng(7)
    alpha, n_tune, n_cal, n_test, draws = 0.1, 60, 60, 100, 50
    coverage, sizes = [], []
    for d in range(draws):
        tune, cal, test = (synthetic(rng, n, f"{part}{d}-") for part, n in
                           (("t", n_tune), ("c", n_cal), ("x", n_test)))
        score = LogisticCandidateScore.fit(tune)
        q = conformal_quantile(best_gold(cal, score.scores(cal)), alpha)
        s = score.scores(test)
        coverage.append(float((best_gold(test, s) <= q).mean()))
        sizes.append(float(np.bincount(test.node_q[s <= q], minlength=n_test).mean()))
    mean, se = float(np.mean(coverage)), float(np.std(coverage, ddof=1) / math.sqrt(draws))
    assert 1 - alpha - 3 * se <= mean <= 1 - alpha + 1 / (n_cal + 1) + 3 * se, (mean, se)
    # and it learns: smaller sets than thresholding Eq. 6 alone at the same coverage rule
    tune, cal, test = synthetic(rng, 200, "T"), synthetic(rng, 200, "C"), synthetic(rng, 400, "X")
    q6 = conformal_quantile(best_gold(cal, cal.eq6), alpha)
    eq6_size = np.bincount(test.node_q[test.eq6 <= q6], minlength=400).mean()
    assert np.mean(sizes) < eq6_size


def test_uag_with_the_learned_score_keeps_ltt_s_guarantee() -> None:
    """UAG over the learned score alone (fixed-sequence LTT, δ = 0.1): the share of draws whose true miss
    rate (on a large test split) exceeds α stays within δ plus binomial noise over the draws."""
    rng = np.random.default_rng(11)
    alpha, delta, draws = 0.2, 0.1, 40
    exceed = 0
    for d in range(draws):
        tune, cal = synthetic(rng, 40, f"t{d}-"), synthetic(rng, 80, f"c{d}-")
        test = synthetic(rng, 300, f"x{d}-")
        uag = UAG(UAGConfig(alpha=alpha, steps=(0.1, 0.1, 0.05), evaluator_scores=("learned",),
                            ltt=LTTConfig(delta=delta)))
        uag.fit(tune).calibrate(cal)
        if not uag.abstains:
            exceed += float(1 - uag.evaluate(test)["covered"].mean()) > alpha + 0.03  # test-split noise
    tolerance = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert exceed / draws <= delta + tolerance


@pytest.fixture
def recording_score() -> Iterator[list[list[str]]]:
    """A test double: a candidate score registered as ``recording`` that fits the real logistic score
    and records the question ids of every batch it was fitted on."""
    fitted_on: list[list[str]] = []

    def fit(batch: TableBatch) -> LogisticCandidateScore:
        fitted_on.append(list(batch.qids))
        return LogisticCandidateScore.fit(batch)

    register_candidate_score(CandidateScoreRule("recording", "test double", fit,
                                                LogisticCandidateScore.from_dict))
    try:
        yield fitted_on
    finally:
        del CANDIDATE_SCORES["recording"]


def test_the_learned_score_never_sees_a_calibration_row(recording_score: list[list[str]]) -> None:
    rng = np.random.default_rng(3)
    tables = synthetic(rng, 120)
    cfg = UAGConfig(alpha=0.2, evaluator_scores=("absolute", "recording"))  # type: ignore[arg-type]
    uag, summary = calibrate_uag(tables, cfg, TableSettings(), tune_fraction=0.4, seed=5)
    assert summary["certified"]
    perm = np.random.default_rng(5).permutation(120)
    tune_ids = {tables.qids[i] for i in perm[:48]}
    # the whole tuning split, then its cross-fitting folds: each fit on tuning rows only
    assert set(recording_score[0]) == tune_ids and len(recording_score) == 1 + CROSS_FIT_FOLDS
    assert all(set(rows) < tune_ids for rows in recording_score[1:])
    # calibrating again on other rows, or evaluating, fits nothing
    uag.calibrate(tables.subset(perm[48:]))
    uag.evaluate(tables)
    assert len(recording_score) == 1 + CROSS_FIT_FOLDS
    # a calibration row's labels do not change the fitted score
    flipped = tables.subset(perm[48:])
    flipped.gold = ~flipped.gold
    again = UAG(cfg).fit(tables.subset(perm[:48]))
    again.calibrate(flipped)
    np.testing.assert_array_equal(again.learned_["recording"].scores(tables),
                                  uag.learned_["recording"].scores(tables))


def test_features_of_a_question_do_not_depend_on_the_batch() -> None:
    rng = np.random.default_rng(1)
    batch = synthetic(rng, 5)
    x = candidate_features(batch)
    assert x.shape == (batch.node_q.size, len(FEATURES)) and np.isfinite(x).all()
    for q in range(5):
        np.testing.assert_array_equal(candidate_features(TableBatch.from_tables([batch.table(q)])),
                                      x[batch.node_q == q])


def test_predict_set_alone_equals_the_batch_evaluation_and_survives_saving(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    tables = synthetic(rng, 150)
    cfg = UAGConfig(alpha=0.2, evaluator_scores=("learned",), order="front+chain")
    uag, _ = calibrate_uag(tables, cfg, TableSettings(), tune_fraction=0.4, seed=1)
    assert not uag.abstains and uag.evaluator_score_ == "learned"
    m = uag.evaluate(tables)
    for q in range(tables.num_questions):
        got = uag.predict_set(tables.table(q))
        assert got.size == m["size"][q]
        assert bool(tables.table(q).gold[got].any()) == bool(m["covered"][q])
    path = CalibratedUAG(uag, TableSettings(), {}).save(tmp_path / "uag.json")
    loaded = CalibratedUAG.load(path).uag
    for q in range(10):
        np.testing.assert_array_equal(loaded.predict_set(tables.table(q)), uag.predict_set(tables.table(q)))
    fitted = UAG(cfg).fit(tables.subset(np.arange(60)))
    grouped = GroupedUAG.from_fit(fitted, tables.subset(np.arange(60, 150)))
    back = GroupedUAG.from_dict(grouped.to_dict())
    a, b = grouped.certify(np.arange(90)), back.certify(np.arange(90))
    assert a is not None and b is not None and a.index_ == b.index_
    np.testing.assert_array_equal(a.evaluate(tables)["size"], b.evaluate(tables)["size"])


def test_bad_input_is_refused() -> None:
    rng = np.random.default_rng(4)
    tables = synthetic(rng, 10)
    with pytest.raises(ConfigError, match="unknown evaluator score 'learnt'"):
        UAGConfig(evaluator_scores=("learnt",))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown candidate score"):
        candidate_score("nope")
    with pytest.raises(ConfigError, match="registered twice"):
        register_candidate_score(CANDIDATE_SCORES["learned"])
    with pytest.raises(ConfigError, match="fitted on a tuning split"):
        tables.rescored("learned")
    no_gold = tables.subset(np.arange(10))
    no_gold.gold = np.zeros_like(no_gold.gold)
    with pytest.raises(ConfigError, match="needs gold and non-gold"):
        LogisticCandidateScore.fit(no_gold)
    fitted = LogisticCandidateScore.fit(tables)
    without_items = TableBatch(tables.qids, tables.state_q, tables.state_node, tables.prefix, tables.expand,
                               tables.collect, tables.node_q, tables.node_ids, tables.eq6, tables.gold)
    with pytest.raises(ConfigError, match="item-level"):
        fitted.scores(without_items)
    body = fitted.to_dict()
    with pytest.raises(ValueError, match="logistic"):
        LogisticCandidateScore.from_dict({**body, "features": ["eq6"]})


def test_on_webqsp_the_learned_score_is_certified_and_no_larger(webqsp_uag_tables: TableBatch) -> None:
    """300 WebQSP questions (RoG's generations, the Freebase fragment), α = 0.3: UAG's family with the
    learned score certifies, and on the held-out third its sets are no larger on average than the family
    without it, at coverage within noise of 1 − α."""
    tables = webqsp_uag_tables
    perm = np.random.default_rng(0).permutation(tables.num_questions)
    tune, cal, test = (tables.subset(p) for p in (perm[:100], perm[100:200], perm[200:]))
    sizes = {}
    for kinds in (EVALUATOR_SCORES, (*EVALUATOR_SCORES, "learned")):
        uag = UAG(UAGConfig(alpha=0.3, evaluator_scores=kinds)).fit(tune).calibrate(cal)
        assert not uag.abstains
        m = uag.evaluate(test)
        assert m["covered"].mean() >= 0.7 - 3 * math.sqrt(0.21 / 100)
        sizes[len(kinds)] = float(m["size"].mean())
    assert sizes[5] <= sizes[4] * 1.1, sizes


def test_eval_uag_runs_the_methods_named_and_refuses_others() -> None:
    from kgwise.eval.uag.experiment import UAGExperimentConfig, run_split

    with pytest.raises(ConfigError, match="unknown methods"):
        UAGExperimentConfig(methods=("uag", "uag_learnt"))
    rng = np.random.default_rng(9)
    tables = synthetic(rng, 100)
    cfg = UAGExperimentConfig(alphas=(0.3,), methods=("uag", "uag_learned", "split_cp"), tune_fraction=0.3,
                           cal_fraction=0.4)
    out = run_split(tables, None, cfg, 0, None)  # no candidates: split_cp is not run
    assert set(out) == {"uag", "uag_learned"}
    assert not out["uag_learned"][0]["abstained"]


def test_eval_uag_counts_a_split_whose_tuning_part_cannot_fit_the_score_as_no_set() -> None:
    from kgwise.eval.uag.experiment import UAGExperimentConfig, run_split

    rng = np.random.default_rng(10)
    tables = synthetic(rng, 40)
    tables.gold = np.zeros_like(tables.gold)
    cfg = UAGExperimentConfig(alphas=(0.3,), methods=("uag_learned",), tune_fraction=0.3, cal_fraction=0.4)
    row = run_split(tables, None, cfg, 0, None)["uag_learned"][0]
    assert row["abstained"] and "fit the learned score" in row["why"]


def test_size_thresholds_step_geometrically_in_the_mean_set_size() -> None:
    rng = np.random.default_rng(4)
    scores = rng.normal(size=20 * 100)  # 20 questions of 100 candidates
    levels = np.asarray([0.75, 0.5, 0.25, 0.0])
    t = size_thresholds(scores, 20, levels)
    kept = [(scores <= x).sum() / 20 for x in t]
    np.testing.assert_allclose(kept, [100 ** 0.25, 100 ** 0.5, 100 ** 0.75, 100], rtol=0.05)
    assert t[-1] == np.inf and (np.diff(t) >= 0).all()


def test_with_chains_steps_down_in_size_from_the_largest_set() -> None:
    risk = np.asarray([0.0, 0.1, 0.1, 0.1, 0.2, 0.15, 0.3])
    size = np.asarray([100.0, 10.0, 50.0, 30.0, 5.0, 40.0, 1.0])
    front = [0, 1, 4, 6]  # the largest set first, then the Pareto front
    seq = with_chains(front, risk, size, [2, 3, 5])
    # at risk 0.1 the chain's larger sets come before the front's 10; the chain's 40 at risk 0.15 would
    # follow a smaller set and could only end the sequence early, so it is left out
    assert seq.tolist() == [0, 2, 3, 1, 4, 6]
