"""``kgwise.route.tuning``: replay of a router over an outcome table, and two-fold cross-fitting of Coke's
open settings (what ``kgwise fit`` uses)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import (
    CrossFit,
    RoutingGain,
    TuningConfig,
    best_single_arm,
    cross_fit,
    halves,
    simulate,
    single_arm,
)


def _table(n: int = 160, seed: int = 0) -> tuple[OutcomeTable, np.ndarray, np.ndarray]:
    """A free arm right exactly on kind-0 questions, a paid arm right on 90 % of all; an informative
    context (intercept, kind) and an uninformative one (intercept, noise)."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(2, size=n)
    informative = np.stack([np.ones(n), (kind == 0).astype(float)], axis=1)
    noise = np.stack([np.ones(n), rng.random(n)], axis=1)
    correct = np.stack([kind == 0, rng.random(n) < 0.9], axis=1)
    cost = np.tile([0.0, 0.01], (n, 1))
    table = OutcomeTable(tuple(f"q{i}" for i in range(n)), tuple(f"question {i}" for i in range(n)),
                         ("kgm", "llm"), ("KGM", "LLM"), (0.5, 0.9), correct, cost)
    return table, informative, noise


def test_halves_split_every_question_once() -> None:
    a, b = halves(11, 3)
    assert sorted([*a, *b]) == list(range(11)) and len(a) == 5
    assert all(np.array_equal(x, y) for x, y in zip(halves(11, 3), (a, b), strict=True))


def test_a_warm_score_is_a_router_that_learnt_the_other_half_then_routed_this_one() -> None:
    table, x, _ = _table()
    engine = CrossFit(table, {"ctx": x}, CokeConfig(lam=0.0), 2, lambda half: 0.5 * 0.01 * half.n_questions)
    point = ("ctx", 0.5, True)
    got = engine.score(1, point, warm=True)
    tune, held = halves(160, 0)
    half = table.subset(held)
    accs = []
    for s in range(2):
        router = CokeRouter(half.arm_specs(), 2, budget=0.5 * 0.01 * 80, seed=s, horizon=80,
                            config=replace(CokeConfig(lam=0.0), gamma_override=0.5, decomposed_reward=True))
        router.warm_start(x[tune], table.correct[tune])
        run = simulate(router, half, x[held], np.random.default_rng(s).permutation(80), router)
        accs.append(run.accuracy)
        assert run.total_cost <= 0.5 * 0.01 * 80 + 1e-12
    assert got.accuracies == tuple(accs) and got.accuracy == pytest.approx(np.mean(accs))


def test_cross_fit_scores_every_grid_point_on_both_folds_and_picks_the_best() -> None:
    table, informative, noise = _table()
    cfg = TuningConfig(gammas=(None, 0.25), decomposed=(False, True))
    report = cross_fit(table, {"noise": noise, "informative": informative}, CokeConfig(lam=0.0),
                       lambda half: 0.3 * 0.01 * half.n_questions, paced=True, config=cfg, seeds=2)
    assert len(report.grid) == 8 and report.fold_sizes == (80, 80) and report.seeds == 2
    best = max(g.accuracy for g in report.grid)
    assert report.chosen.accuracy == best
    for g in report.grid:
        assert g.accuracy == pytest.approx(np.mean(g.accuracy_by_fold))
        assert 0 <= g.cost_per_question <= 0.3 * 0.01 + 1e-12  # within the budget per question
    # the context that tells when the free arm is right routes better than noise
    by_ctx = {c: max(g.accuracy for g in report.grid if g.context == c) for c in ("noise", "informative")}
    assert by_ctx["informative"] > by_ctx["noise"] and report.chosen.context == "informative"
    row = report.to_dict()
    assert row["chosen"]["context"] == "informative" and len(row["grid"]) == 8
    # the paid arm cannot answer every question at 30 %: the baseline is the free arm, which routing beats
    one = report.single_arm
    assert one is not None and one.arm_by_fold == ("kgm", "kgm")
    gain = report.gain
    assert gain is not None and gain.single_arm_accuracy == pytest.approx(one.accuracy)
    assert gain.gain > 3 * gain.se and gain.pays(1.0)  # routing clears the free arm by far
    assert tuple(row["single_arm"]["arm_by_fold"]) == ("kgm", "kgm") and row["gain"]["gain"] == gain.gain


def test_the_gain_routes_each_fold_with_the_point_that_won_the_other_and_pairs_questions() -> None:
    table, informative, noise = _table(seed=1)
    cfg = TuningConfig(gammas=(None, 0.25), decomposed=(False, True))
    contexts = {"noise": noise, "informative": informative}

    def budget(half: OutcomeTable) -> float:
        return 0.3 * 0.01 * half.n_questions

    report = cross_fit(table, contexts, CokeConfig(lam=0.0), budget, paced=True, config=cfg, seeds=2)
    gain = report.gain
    assert gain is not None and gain.questions == 160
    engine = CrossFit(table, contexts, CokeConfig(lam=0.0), 2, budget)
    grid = cfg.grid(engine.contexts)
    d, cost = [], 0.0
    for h in (0, 1):
        scores = [engine.score(1 - h, p, warm=True) for p in grid]
        best = max(range(len(grid)), key=lambda i: (scores[i].accuracy, -scores[i].cost, -i))
        assert gain.points[h] == grid[best]
        run = engine.score(h, grid[best], warm=True)
        single = engine.parts[h].correct[:, table.arm_index("kgm")]
        d.append(run.right - single)
        cost += run.cost
    diffs = np.concatenate(d)
    assert gain.gain == pytest.approx(diffs.mean())
    assert gain.se == pytest.approx(diffs.std(ddof=1) / np.sqrt(160))
    assert gain.accuracy == pytest.approx(gain.single_arm_accuracy + gain.gain)
    assert gain.cost_per_question == pytest.approx(cost / 160) and gain.single_arm_cost_per_question == 0.0


def test_routing_does_not_pay_where_a_free_arm_is_as_good_as_anything() -> None:
    table, x, _ = _table()
    rng = np.random.default_rng(5)
    # the free arm is right on 80 % at random, the paid one on 50 %: nothing in the context tells them apart
    even = replace(table, correct=np.stack([rng.random(160) < 0.8, rng.random(160) < 0.5], axis=1))
    report = cross_fit(even, {"ctx": x}, CokeConfig(), lambda half: 0.01 * half.n_questions, paced=True,
                       config=TuningConfig(gammas=(None,), decomposed=(False,)), seeds=2)
    gain = report.gain
    assert gain is not None and gain.single_arm_cost_per_question == 0.0 and not gain.pays(1.0)
    assert best_single_arm(even, even, 0.0) == 0


def _gain(gain: float, se: float, cost: float, single_cost: float) -> RoutingGain:
    return RoutingGain((("c", None, False), ("c", None, False)), 0.5, gain, se, cost, single_cost, 100)


@given(st.floats(-0.5, 0.5), st.floats(0.0, 0.2), st.floats(0.0, 3.0), st.floats(0.0, 3.0),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_routing_pays_only_past_z_standard_errors_and_less_so_for_a_larger_z(
        g: float, se: float, z1: float, z2: float, cost: float, single_cost: float) -> None:
    r = _gain(g, se, cost, single_cost)
    lo, hi = sorted((z1, z2))
    if single_cost <= cost:  # an arm no dearer: routing must be better by more than z·se
        assert r.pays(lo) == (g > lo * se)
    else:  # a dearer arm: routing, cheaper, must not be worse by more than z·se
        assert r.pays(lo) == (g >= -lo * se)
    # a larger z asks more before paying more, and forgives more before paying less
    assert r.pays(hi) <= r.pays(lo) if single_cost <= cost else r.pays(hi) >= r.pays(lo)


@given(st.floats(0.001, 0.5), st.floats(0.001, 0.2), st.floats(0.1, 3.0))
def test_the_questions_needed_make_the_same_gain_pay_and_no_fewer_do(g: float, se: float, z: float) -> None:
    r = _gain(g, se, 0.5, 0.0)  # against a free arm
    need = r.questions_needed(z)
    if r.pays(z):
        assert need is None
        return
    assert need is not None and need >= r.questions
    shrink = math.sqrt(r.questions / need)  # the SE at ``need`` questions, the gain unchanged
    assert _gain(g, se * shrink * (1 - 1e-9), 0.5, 0.0).pays(z)
    if need > r.questions + 1:
        fewer = math.sqrt(r.questions / (need - 1))
        assert not _gain(g, se * fewer * (1 + 1e-9), 0.5, 0.0).pays(z)


def test_no_number_of_questions_makes_a_gain_that_loses_pay() -> None:
    assert _gain(0.05, 0.01, 0.5, 0.0).questions_needed(1.0) is None  # pays already
    assert _gain(-0.01, 0.02, 0.5, 0.0).questions_needed(1.0) is None  # loses to a free arm
    assert _gain(-0.05, 0.01, 0.5, 1.0).questions_needed(1.0) is None  # loses too much to a dearer arm
    assert _gain(0.01, 0.02, 0.5, 0.0).questions_needed(1.0) == 400  # 100 · (0.02 / 0.01)²


def test_the_single_arm_baseline_is_learnt_on_one_fold_and_scored_on_the_other() -> None:
    table, x, _ = _table()
    tune, held = halves(160, 0)

    def free(half: OutcomeTable) -> float:  # a budget that no paid arm fits
        return 0.0

    poor = single_arm(CrossFit(table, {"ctx": x}, CokeConfig(), 1, free))
    assert poor is not None and poor.arm_by_fold == ("kgm", "kgm")
    rich = CrossFit(table, {"ctx": x}, CokeConfig(), 1, lambda half: 0.01 * half.n_questions)
    one = single_arm(rich)  # the paid arm fits a budget of its full cost, and is the more accurate
    assert one is not None and one.arm_by_fold == ("llm", "llm")
    assert one.accuracy_by_fold == (pytest.approx(table.correct[tune, 1].mean()),
                                    pytest.approx(table.correct[held, 1].mean()))
    assert one.cost_per_question_by_fold == (pytest.approx(0.01), pytest.approx(0.01))
    priced = replace(table, cost=np.tile([0.005, 0.01], (160, 1)))  # no arm is free, none fits nothing
    assert single_arm(CrossFit(priced, {"ctx": x}, CokeConfig(), 1, free)) is None


def test_cross_fitting_refuses_bad_input() -> None:
    table, x, _ = _table()
    with pytest.raises(ConfigError, match="3 rows for 160"):
        CrossFit(table, {"ctx": x[:3]}, CokeConfig(), 1, lambda _: 1.0)
    with pytest.raises(ConfigError, match="at least 4"):
        CrossFit(table.head(3), {"ctx": x[:3]}, CokeConfig(), 1, lambda _: 1.0)
    with pytest.raises(ConfigError, match="seeds"):
        CrossFit(table, {"ctx": x}, CokeConfig(), 0, lambda _: 1.0)
    with pytest.raises(ConfigError, match="at least one context"):
        CrossFit(table, {}, CokeConfig(), 1, lambda _: 1.0)
