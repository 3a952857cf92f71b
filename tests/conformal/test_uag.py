"""UAG's vectorised grid equals per-question selection; fit/calibrate/predict; abstention; baselines."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kgwise.conformal.grid import QuestionTable, TableBatch
from kgwise.conformal.ltt import LTTConfig, binomial_p_values, learn_then_test
from kgwise.conformal.uag import UAG, UAGConfig, alpha_levels, pareto_order
from kgwise.errors import ConfigError
from kgwise.eval.uag.baselines import CandidateBatch, SplitCPBaseline, TopKBaseline


def random_table(rng: np.random.Generator, qid: str, p_gold: float = 0.3) -> QuestionTable:
    n_nodes = int(rng.integers(0, 12))
    n_states = int(rng.integers(n_nodes, 3 * n_nodes + 1)) if n_nodes else 0
    node = rng.integers(0, max(n_nodes, 1), size=n_states) if n_nodes else np.zeros(0, dtype=np.int64)
    if n_nodes and n_states >= n_nodes:
        node[:n_nodes] = np.arange(n_nodes)  # every node has a state
    prefix = np.where(rng.random(n_states) < 0.3, -np.inf, rng.random(n_states)).round(1)
    collect = rng.random(n_states).round(1)
    expand = np.maximum(prefix, rng.random(n_states).round(1))
    eq6 = rng.random(n_nodes).round(1)
    gold = rng.random(n_nodes) < p_gold
    ids = np.arange(n_nodes) + 100
    return QuestionTable(qid, node.astype(np.int64), prefix, expand, collect, ids, eq6, gold)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100_000))
def test_grid_equals_per_question_final_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tables = [random_table(rng, f"q{i}") for i in range(int(rng.integers(2, 8)))]
    batch = TableBatch.from_tables(tables)
    T = [np.sort(rng.choice([-np.inf, 0.0, 0.1, 0.3, 0.5, 0.7, 1.0, np.inf], size=int(rng.integers(1, 5))))
         for _ in range(3)]
    res = batch.grid(T[0], T[1], T[2])
    i: int  # np.ndindex yields Any: typed so that T[0][i] is a scalar, not an array
    j: int
    k: int
    for q, t in enumerate(tables):
        for i, j, k in np.ndindex(T[0].size, T[1].size, T[2].size):
            s = t.final_set(T[0][i], T[1][j], T[2][k])
            assert res.size[q, i, j, k] == s.size
            assert res.covered[q, i, j, k] == bool(t.gold[s].any())
    cov_only = batch.grid(T[0], T[1], T[2], sizes=False)
    np.testing.assert_array_equal(cov_only.covered, res.covered)
    # subset + table round trip
    sub = batch.subset([len(tables) - 1, 0])
    assert sub.qids == [tables[-1].qid, tables[0].qid]
    back = sub.table(0)
    np.testing.assert_array_equal(back.node_ids, tables[-1].node_ids)
    np.testing.assert_array_equal(back.state_node, tables[-1].state_node)
    np.testing.assert_array_equal(batch.component_scores()[0], tables[0].component_scores())


def synthetic_batch(n: int, seed: int, p_reach: float = 0.95) -> TableBatch:
    """Questions whose gold answer is a candidate with probability ``p_reach``, with informative scores."""
    rng = np.random.default_rng(seed)
    tables = []
    for i in range(n):
        k = int(rng.integers(3, 15))
        gold = np.zeros(k, dtype=bool)
        if rng.random() < p_reach:
            gold[0] = True
        quality = np.where(gold, 0.3, 0.6)
        collect = np.clip(rng.normal(quality, 0.15), 0, 1)
        eq6 = np.clip(rng.normal(np.where(gold, 0.1, 0.5), 0.2), 0, 1)
        prefix = np.where(rng.random(k) < 0.5, -np.inf, np.clip(rng.normal(quality, 0.15), 0, 1))
        expand = np.maximum(prefix, collect)
        tables.append(QuestionTable(f"q{i}", np.arange(k), prefix, expand, collect, np.arange(k), eq6, gold))
    return TableBatch.from_tables(tables)


def test_uag_fit_calibrate_predict_and_guarantee_direction() -> None:
    batch = synthetic_batch(1500, 0)
    tune, cal, test = batch.subset(range(300)), batch.subset(range(300, 800)), batch.subset(range(800, 1500))
    uag = UAG(UAGConfig(alpha=0.2, steps=(0.1, 0.1, 0.1))).fit(tune).calibrate(cal)
    assert uag.grid_shape == (2, 10, 10, 10, 1)  # absolute and relative Eq. 6 scores, no scored part
    assert not uag.abstains and uag.lambda_ is not None
    m = uag.evaluate(test)
    assert m["covered"].mean() >= 0.8 - 0.03
    assert m["size"].mean() < np.bincount(test.node_q).mean()  # smaller than everything
    # evaluate() agrees with predict_set() question by question
    for q in range(0, 700, 97):
        s = uag.predict_set(test.table(q))
        assert s.size == m["size"][q]
        assert bool(test.table(q).gold[s].any()) == bool(m["covered"][q])
        assert bool(s.size and test.table(q).gold[s[0]]) == bool(m["hit1"][q])
    # the chosen λ has the smallest tuning size among Λ_valid
    assert uag.result_ is not None and uag.tune_size_ is not None
    valid = np.flatnonzero(uag.result_.valid)
    assert uag.tune_size_[uag.result_.chosen] == uag.tune_size_[valid].min()


def test_uag_abstains_when_alpha_is_below_the_reachable_miss_rate() -> None:
    batch = synthetic_batch(800, 1, p_reach=0.8)  # ≥ 20 % of questions can never be covered
    uag = UAG(UAGConfig(alpha=0.1, steps=(0.2, 0.2, 0.2))).fit(batch.subset(range(300)))
    uag.calibrate(batch.subset(range(300, 800)))
    assert uag.abstains
    with pytest.raises(ConfigError):
        uag.predict_set(batch.table(0))
    top_p = UAG(UAGConfig(alpha=0.1, steps=(0.2, 0.2, 0.2), ltt=LTTConfig(fwer="top_p")))
    assert top_p.adopt_fit(uag).calibrate(batch.subset(range(300, 800))).abstains


def test_alpha_levels() -> None:
    np.testing.assert_allclose(alpha_levels(0.25), [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(alpha_levels(0.3), [0, 0.3, 0.6, 0.9])
    assert alpha_levels(0.05).size == 20
    with pytest.raises(ConfigError):
        alpha_levels(0)


def gnn_batch() -> CandidateBatch:
    return CandidateBatch.from_lists(
        ["a", "b", "c", "d"],
        [[("x", 0.9), ("y", 0.1)], [("y", 0.6), ("z", 0.4)], [("x", 0.2), ("w", 0.8)], [("v", 1.0)]],
        [["x"], ["z"], ["x"], ["u"]],
    )


def test_split_cp_baseline() -> None:
    b = gnn_batch()
    scores = SplitCPBaseline.calibration_scores(b)
    np.testing.assert_allclose(scores, [0.1, 0.6, 0.8, math.inf])
    cp = SplitCPBaseline().conformalize(b, 0.45)  # rank ⌈5·0.55⌉ = 3 → q = 0.8
    assert cp.quantile_ == pytest.approx(0.8)
    m = cp.evaluate(b)
    np.testing.assert_array_equal(m["covered"], [1, 1, 1, 0])
    np.testing.assert_array_equal(m["size"], [1, 2, 2, 1])
    np.testing.assert_array_equal(m["hit1"], [1, 0, 0, 0])
    assert SplitCPBaseline().conformalize(b, 0.1).quantile_ is None  # +∞: no valid set


def test_top_k_baseline() -> None:
    b = gnn_batch()
    tk = TopKBaseline().fit(b, 0.5)  # need 2 of 4 covered: gold ranks 0, 1, 1, never → K = 2
    assert tk.k_ == 2
    np.testing.assert_array_equal(tk.evaluate(b)["covered"], [1, 1, 1, 0])
    assert TopKBaseline().fit(b, 0.2).k_ is None
    assert TopKBaseline().fit(b, 0.75).k_ == 1


def test_question_table_and_answer_labels_end_to_end(encoder: object) -> None:
    """Live path on a toy KG: retrieve, generate (recorded), score, calibrate, answer with labels."""
    from kgwise.conformal.evaluator import RecordedGenerations, UQEvaluator
    from kgwise.conformal.retriever import UQRetriever
    from kgwise.conformal.scores import S1
    from kgwise.conformal.uag import question_table
    from kgwise.kg import CSRGraph
    from kgwise.types import Question

    triples = []
    questions = []
    answers = {}
    for i in range(60):
        triples += [(f"country {i}", "location.country.capital", f"city {i}"),
                    (f"country {i}", "location.country.currency", f"coin {i}"),
                    (f"city {i}", "location.location.contains", f"district {i}")]
        questions.append(Question(id=f"q{i}", text=f"what is the capital of country {i}", gold=(f"City {i}",),
                                  topic_entities=(f"country {i}",)))
        answers[f"q{i}"] = f"city {i}" if i % 5 else f"coin {i}"  # the LLM is wrong on every 5th
    questions.append(Question(id="q-none", text="unknown topic", gold=("x",), topic_entities=("nowhere",)))
    kg = CSRGraph.from_triples(triples)
    scorer = S1(encoder)  # type: ignore[arg-type]
    ret = UQRetriever(kg, scorer)
    ev = UQEvaluator(scorer, RecordedGenerations({**answers, "q-none": ""}))
    tables = [question_table(q, ret, ev) for q in questions]
    t0 = tables[1]
    assert {kg.label(int(n)) for n in t0.node_ids} == {"city 1", "coin 1", "district 1"}
    assert [kg.label(int(n)) for n in t0.node_ids[t0.gold]] == ["city 1"]
    assert tables[-1].node_ids.size == 0 and tables[-1].component_scores()[0] == math.inf
    batch = TableBatch.from_tables(tables)
    uag = UAG(UAGConfig(alpha=0.3, steps=(0.25, 0.25, 0.25))).fit(batch.subset(range(0, 61, 2)))
    uag.calibrate(batch.subset(range(1, 61, 2)))
    assert not uag.abstains
    labels = uag.answer_labels(tables[1], kg)
    assert labels and labels[0] == "city 1"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 100_000))
def test_relative_scores_shift_each_question_to_its_best_candidate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tables = [random_table(rng, f"q{i}") for i in range(6)]
    batch = TableBatch.from_tables(tables).rescored("relative")
    for i, t in enumerate(tables):
        rel = batch.table(i).eq6
        np.testing.assert_allclose(rel, t.eq6 - t.eq6.min() if t.eq6.size else rel)
        np.testing.assert_allclose(t.rescored("relative").eq6, rel)
        if rel.size:  # the ordering within a question is unchanged, the best candidate scores 0
            assert rel.min() == 0.0
            assert (np.argsort(rel, kind="stable") == np.argsort(t.eq6, kind="stable")).all()
    inf = QuestionTable("q", np.zeros(1, np.int64), np.zeros(1), np.zeros(1), np.zeros(1),
                        np.arange(2), np.array([math.inf, 0.4]), np.array([False, True]))
    assert inf.rescored("relative").eq6.tolist() == [math.inf, 0.0]
    with pytest.raises(ConfigError):
        inf.rescored("cosine")  # type: ignore[arg-type]


def test_uag_over_both_evaluator_scores_predicts_with_the_chosen_one() -> None:
    batch = synthetic_batch(1200, 3)
    tune, cal, test = batch.subset(range(300)), batch.subset(range(300, 700)), batch.subset(range(700, 1200))
    both = UAG(UAGConfig(alpha=0.2, steps=(0.2, 0.2, 0.1))).fit(tune).calibrate(cal)
    absolute = UAGConfig(alpha=0.2, steps=(0.2, 0.2, 0.1), evaluator_scores=("absolute",))
    only = UAG(absolute).fit(tune).calibrate(cal)
    assert both.grid_shape == (2, *only.grid_shape[1:])
    # the absolute half of the union grid is the absolute-only grid
    g = int(np.prod(only.grid_shape))
    assert both.tune_size_ is not None and only.tune_size_ is not None
    np.testing.assert_allclose(both.tune_size_[:g], only.tune_size_)
    assert both.evaluator_score_ in ("absolute", "relative")
    m = both.evaluate(test)
    for q in range(0, 500, 61):
        s = both.predict_set(test.table(q))
        assert s.size == m["size"][q]
        assert bool(test.table(q).gold[s].any()) == bool(m["covered"][q])
    with pytest.raises(ConfigError):
        UAGConfig(evaluator_scores=())
    with pytest.raises(ConfigError):
        UAGConfig(evaluator_scores=("absolute", "absolute"))


def test_item_level_scores_travel_with_the_tables(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    plain = [random_table(rng, f"q{i}") for i in range(8)]
    tables = [replace(t, eq6_items=np.round(t.eq6 * 0.5, 2)) for t in plain]
    batch = TableBatch.from_tables(tables)
    assert batch.eq6_items is not None
    part = batch.subset([5, 2])
    part_items, items5 = part.table(0).eq6_items, tables[5].eq6_items
    assert part_items is not None and items5 is not None
    np.testing.assert_allclose(part_items, items5)
    back = TableBatch.load(batch.save(tmp_path / "t.npz"))
    assert back.eq6_items is not None
    np.testing.assert_allclose(back.eq6_items, batch.eq6_items)
    items = batch.rescored("items")
    np.testing.assert_allclose(items.eq6, batch.eq6_items)
    rel = batch.rescored("items-relative")
    for i, t in enumerate(tables):
        np.testing.assert_allclose(rel.table(i).eq6, t.rescored("items-relative").eq6)
    with pytest.raises(ConfigError, match="item-level"):
        TableBatch.from_tables(plain).rescored("items")
    assert TableBatch.from_tables(plain + tables[:1]).eq6_items is None  # only when every table has them


def with_random_scored(batch: TableBatch, rng: np.random.Generator) -> TableBatch:
    """``batch`` plus a scored retriever: some candidates are existing nodes (matched by id), some new."""
    q, ids, nc, gold = [], [], [], []
    for i in range(batch.num_questions):
        t = batch.table(i)
        for node in t.node_ids[rng.random(t.node_ids.size) < 0.4].tolist():  # shared with the paths
            q.append(i)
            ids.append(node)
            nc.append(round(float(rng.random()), 1))
            gold.append(bool(t.gold[t.node_ids == node][0]))
        for _ in range(int(rng.integers(0, 4))):  # only the scored retriever has these
            q.append(i)
            ids.append(10_000 + len(ids))
            nc.append(round(float(rng.random()), 1))
            gold.append(bool(rng.random() < 0.3))
    return batch.with_scored(q, nc, gold, ids)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 100_000))
@example(1284)  # t4 = +∞ at the small α4 levels once took the nodes the scored retriever did not return
def test_scored_union_totals_equal_per_question_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    plain = TableBatch.from_tables([random_table(rng, f"q{i}") for i in range(int(rng.integers(3, 9)))])
    batch = with_random_scored(plain, rng)
    uag = UAG(UAGConfig(steps=(0.25, 0.25, 0.25), scored_step=0.25)).fit(batch)
    assert uag.grid_shape == (2, 4, 4, 4, 5) and uag.scored_levels_[0] == 1.0
    losses = uag.loss_counts(batch)
    assert uag.tune_size_ is not None
    for idx in rng.choice(int(np.prod(uag.grid_shape)), size=40, replace=False).tolist():
        kind, th = uag.evaluator_score_at(idx), uag.thresholds_at(idx)
        sets = [batch.table(q).rescored(kind).final_set(*th) for q in range(batch.num_questions)]
        assert np.isclose(uag.tune_size_[idx], np.mean([s.size for s in sets]))
        missed = sum(not batch.table(q).gold[s].any() for q, s in enumerate(sets))
        assert losses[idx] == missed
    # α4 = 1 adds nothing: that slice is the family without the scored retriever
    alone = UAG(UAGConfig(steps=(0.25, 0.25, 0.25))).fit(plain)
    assert alone.tune_size_ is not None
    np.testing.assert_allclose(uag.tune_size_.reshape(uag.grid_shape)[..., 0].ravel(), alone.tune_size_)


def test_with_scored_merges_by_id_and_travels(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    tables = [random_table(rng, f"q{i}") for i in range(6)]
    tables[2] = QuestionTable("q2", np.zeros(1, np.int64), np.zeros(1), np.zeros(1), np.zeros(1),
                              np.array([100, 101]), np.array([0.2, 0.4]), np.array([False, True]))
    batch = TableBatch.from_tables(tables)
    out = batch.with_scored([2, 2, 4], [0.3, 0.1, 0.5], [True, False, True], [101, 555, 7])
    t2 = out.table(2)
    assert t2.node_ids.tolist() == [100, 101, 555]  # 101 merged, 555 appended after the question's nodes
    assert t2.scored is not None and t2.scored.tolist() == [math.inf, 0.3, 0.1]
    assert t2.gold.tolist() == [False, True, False] and t2.eq6[2] == math.inf
    np.testing.assert_array_equal(t2.state_node, tables[2].state_node)  # states still point at node 100
    assert out.table(4).node_ids[-1] == 7 and out.table(4).scored[-1] == 0.5  # type: ignore[index]
    assert out.table(2).final_set(-1, -1, -1, 0.3).tolist() == [1, 2]  # scored part only; Eq. 6 first
    assert out.table(2).final_set(-1, -1, -1, math.inf).tolist() == [1, 2]  # never node 100 (scored +∞)
    part = out.subset([2]).scored_grid([0.2, math.inf])
    assert part.size.tolist() == [[1, 2]] and part.covered.tolist() == [[False, True]]
    back = TableBatch.load(out.subset([4, 2]).save(tmp_path / "s.npz"))
    assert back.scored is not None and back.table(1).scored.tolist() == [math.inf, 0.3, 0.1]  # type: ignore[union-attr]
    appended = batch.with_scored([0], [0.2], [True])  # ids from another id space: always new nodes
    assert appended.table(0).node_ids[-1] == -1 and appended.node_q.size == batch.node_q.size + 1
    with pytest.raises(ConfigError):
        batch.with_scored([9], [0.1], [True])
    fitted = UAG(UAGConfig(alpha=0.5, steps=(0.5, 0.5, 0.5), scored_step=0.5)).fit(appended)
    # as if calibration had chosen λ with the scored part only (t4 = 1 takes every scored candidate)
    fitted.chosen_thresholds_, fitted.evaluator_score_ = (-1.0, -1.0, -1.0, 1.0), "absolute"
    with pytest.raises(ConfigError, match="without KG node ids"):
        fitted.answer_labels(appended.table(0), None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        UAG(UAGConfig(scored_step=0.2)).fit(batch)  # no scored retriever in these tables


def gnn_like(batch: TableBatch, rng: np.random.Generator) -> TableBatch:
    """A GNN-like scored retriever: finds the gold answer of most questions the paths miss, plus noise."""
    q, nc, gold = [], [], []
    for i in range(batch.num_questions):
        has = bool(batch.table(i).gold.any())
        q += [i, i]
        nc += [float(np.clip(rng.normal(0.2 if not has else 0.6, 0.2), 0, 1)), float(rng.random())]
        gold += [not has and rng.random() < 0.9, False]
    return batch.with_scored(q, nc, gold)


def test_uag_with_a_scored_retriever_covers_and_predicts_consistently() -> None:
    scored = gnn_like(synthetic_batch(1200, 4, p_reach=0.8), np.random.default_rng(2))
    tune, cal, test = (scored.subset(range(300)), scored.subset(range(300, 700)),
                       scored.subset(range(700, 1200)))
    uag = UAG(UAGConfig(alpha=0.1, steps=(0.2, 0.2, 0.1), scored_step=0.1)).fit(tune).calibrate(cal)
    paths_only = UAG(UAGConfig(alpha=0.1, steps=(0.2, 0.2, 0.1))).fit(tune).calibrate(cal)
    assert paths_only.abstains  # 80 % reachable by paths: α = 0.1 cannot be certified without the GNN
    assert not uag.abstains and uag.lambda_ is not None and uag.lambda_[3] < 1.0
    m = uag.evaluate(test)
    assert m["covered"].mean() >= 0.9 - 0.03
    for i in range(0, 500, 53):
        s = uag.predict_set(test.table(i))
        assert s.size == m["size"][i] and bool(test.table(i).gold[s].any()) == bool(m["covered"][i])
        assert bool(s.size and test.table(i).gold[s[0]]) == bool(m["hit1"][i])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=30))
def test_pareto_order_keeps_exactly_the_undominated(points: list[tuple[int, int]]) -> None:
    risk = np.asarray([p[0] for p in points], dtype=np.float64)
    size = np.asarray([p[1] for p in points], dtype=np.float64)
    order = pareto_order(risk, size)
    assert (np.diff(risk[order]) > 0).all() and (np.diff(size[order]) < 0).all()  # risk ↑, size ↓
    for i in range(risk.size):
        dominated = ((risk <= risk[i]) & (size <= size[i]) & ((risk < risk[i]) | (size < size[i]))).any()
        same_point_kept = any(risk[j] == risk[i] and size[j] == size[i] for j in order.tolist())
        assert same_point_kept != dominated  # one representative per undominated point, none dominated


def one_gold_table(qid: str, gold_eq6: float, other_eq6: float, k: int = 5) -> QuestionTable:
    """``k`` candidates, one state each with equal path scores; the first is gold with Eq. 6 ``gold_eq6``."""
    gold = np.zeros(k, dtype=bool)
    gold[0] = True
    eq6 = np.where(gold, gold_eq6, other_eq6)
    zeros = np.zeros(k)
    return QuestionTable(qid, np.arange(k), zeros, zeros, zeros, np.arange(k), eq6, gold)


def test_sequence_starts_at_the_largest_set_so_a_lucky_tuning_split_does_not_end_it() -> None:
    # tuning: the gold candidate is the generation's best match, so the tuning front starts with a tiny set;
    # calibration: the gold one is the worst match, so only unfiltered sets cover (and all of them do)
    tune = TableBatch.from_tables([one_gold_table(f"t{i}", 0.1, 0.9) for i in range(7)])
    cal = TableBatch.from_tables([one_gold_table(f"c{i}", 0.9, 0.1) for i in range(20)])
    uag = UAG(UAGConfig(alpha=0.2, steps=(0.25, 0.25, 0.25))).fit(tune)
    assert uag.order_ is not None and uag.order_[0] == uag.largest_index
    assert uag.lambda_at(uag.largest_index)[:3] == (0.0, 0.0, 0.0)
    losses = uag.loss_counts(cal)
    assert losses[uag.largest_index] == 0 == losses.min()
    assert uag.tune_size_ is not None and uag.tune_risk_ is not None
    front = pareto_order(uag.tune_risk_, uag.tune_size_)
    assert uag.largest_index not in front.tolist() and losses[front[0]] == cal.num_questions
    without = learn_then_test(losses, cal.num_questions, 0.2, LTTConfig(), uag.tune_size_, front)
    assert without.chosen is None  # the front alone certifies nothing
    uag.calibrate(cal)
    assert not uag.abstains and uag.lambda_ is not None and uag.lambda_[:3] == (0.0, 0.0, 0.0)
    assert uag.evaluate(cal)["covered"].all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=30), st.data())
def test_pareto_order_with_a_first_hypothesis(points: list[tuple[int, int]], data: st.DataObject) -> None:
    risk = np.asarray([p[0] for p in points], dtype=np.float64)
    size = np.asarray([p[1] for p in points], dtype=np.float64)
    first = data.draw(st.integers(0, len(points) - 1))
    order = pareto_order(risk, size, first=first)
    front = pareto_order(risk, size)
    assert order[0] == first and len(set(order.tolist())) == order.size
    np.testing.assert_array_equal(order[1:], front[front != first])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_nested_chain_sets_shrink_so_calibration_misses_only_grow(seed: int) -> None:
    batch = synthetic_batch(60, seed, p_reach=0.9)
    uag = UAG(UAGConfig(alpha=0.2, steps=(0.25, 0.25, 0.2))).fit(batch.subset(range(15)))
    assert uag.chain_ is not None and uag.chain_[0] == uag.largest_index
    assert len(set(uag.chain_.tolist())) == uag.chain_.size == 1 + 3 + 3 + 4  # one level per step
    cal = batch.subset(range(15, 60))
    grid = uag.grid(cal)
    per_q_size = grid.size.reshape(cal.num_questions, -1)[:, uag.chain_]
    per_q_cov = grid.covered.reshape(cal.num_questions, -1)[:, uag.chain_]
    assert (np.diff(per_q_size, axis=1) <= 0).all() and (np.diff(per_q_cov.astype(int), axis=1) <= 0).all()
    assert len({uag.evaluator_score_at(int(i)) for i in uag.chain_[1:]}) == 1


def test_front_and_chain_is_the_union_of_two_sequences_at_half_delta() -> None:
    batch = synthetic_batch(400, 5, p_reach=0.93)
    tune, cal = batch.subset(range(30)), batch.subset(range(30, 400))
    uag = UAG(UAGConfig(alpha=0.15, steps=(0.1, 0.1, 0.1), order="front+chain")).fit(tune).calibrate(cal)
    losses = uag.loss_counts(cal)
    assert uag.tune_size_ is not None and uag.result_ is not None
    assert uag.order_ is not None and uag.chain_ is not None and losses[uag.largest_index] < 0.1 * 370
    half = LTTConfig(delta=0.025)
    front = learn_then_test(losses, 370, 0.15, half, uag.tune_size_, uag.order_[1:])
    chain = learn_then_test(losses, 370, 0.15, half, uag.tune_size_, uag.chain_[1:])
    union = front.valid | chain.valid
    union[uag.largest_index] = True  # rejected first, at δ
    np.testing.assert_array_equal(uag.result_.valid, union)
    # the largest set is tested at δ, not δ/2: an α where its p-value lies in (δ/2, δ] still certifies it
    alphas = np.linspace(0.01, 0.2, 400)
    p_first = np.asarray([binomial_p_values([losses[uag.largest_index]], 370, float(a))[0] for a in alphas])
    a = float(alphas[np.flatnonzero((p_first > 0.025) & (p_first <= 0.05))[0]])
    at_edge = UAG(replace(uag.config, alpha=a)).adopt_fit(uag).calibrate(cal, losses=losses)
    assert not at_edge.abstains and at_edge.result_ is not None and at_edge.result_.valid[uag.largest_index]
    assert chain.valid.sum() > 1 and not uag.abstains
    assert uag.tune_size_[uag.result_.chosen] == uag.tune_size_[uag.result_.valid].min()
    with pytest.raises(ConfigError, match="fixed_sequence"):
        UAGConfig(order="front+chain", ltt=LTTConfig(fwer="holm"))
