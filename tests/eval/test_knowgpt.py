"""The KnowGPT evaluation's bookkeeping: a run directory resumes only a run of the same data set, LLM and
settings; outcomes keep every scoring rule's correctness and reports read the chosen one."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.eval.knowgpt import KnowGPTExperimentConfig as ExperimentConfig
from kgwise.eval.knowgpt import (
    OutcomeStore,
    _claim_run_dir,
    _other_run,
    _row,
    _seconds,
    _split_report,
    compare_runs,
    markdown_table,
    questions_to_test,
)
from kgwise.files import short_hash
from kgwise.inject import ARMS, WITHOUT_KG, BanditConfig, Injection, PromptBandit
from kgwise.llm import ChoiceScores
from kgwise.types import Answer, Choice, Question, Usage


def test_run_dir_resumes_only_the_same_run(tmp_path: Path) -> None:
    cfg = ExperimentConfig()
    first = _claim_run_dir(tmp_path, "csqa", "smollm2-135m", cfg)
    assert _claim_run_dir(tmp_path, "csqa", "smollm2-135m", cfg) == first  # a resume
    # more test questions: the same run (and the same fingerprint of its outcomes)
    assert _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(limit=1000)) == first
    with pytest.raises(ConfigError, match="llm"):
        _claim_run_dir(tmp_path, "csqa", "gemma3-270m", cfg)
    with pytest.raises(ConfigError, match="train_limit"):
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(train_limit=400))
    with pytest.raises(ConfigError, match="scoring"):  # outcomes were scored by another rule
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(scoring="sum"))
    with pytest.raises(ConfigError, match="bandit"):  # the bandit was trained with other settings
        _claim_run_dir(tmp_path, "csqa", "smollm2-135m", ExperimentConfig(bandit=BanditConfig(ridge_grid=())))


def test_unknown_scoring_rule_is_named() -> None:
    with pytest.raises(ConfigError, match="scoring must be one of sum, mean, pmi, auto"):
        ExperimentConfig(scoring="max")


def test_a_subset_of_combinations_reports_only_those(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="combos must be some of P_sub"):
        ExperimentConfig(combos=("P_sub+F_x",))
    assert not ExperimentConfig(combos=("P_sub+F_t", "P_sub+F_s")).needs_rl and ExperimentConfig().needs_rl
    q = Question("q1", "What purrs?", (Choice("A", "dog"), Choice("B", "cat")), gold=("B",))
    inj = Injection(Answer("q1", "B", {"A": 0.0, "B": 1.0}), ChoiceScores((-3.0, -1.0), (-3.0, -1.0)))
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    for s in (WITHOUT_KG, "P_sub+F_t"):
        store.put(_row(q, s, inj, None))
    report = _split_report([q], [WITHOUT_KG, "P_sub+F_t"], {"full": ["P_sub+F_t"]}, store,
                           PromptBandit(4, ("P_sub+F_t",)), "sum")
    assert list(report["combos"]) == ["P_sub+F_t"] and report["full"]["accuracy"] == 1.0
    table = markdown_table({"obqa": {"splits": {"test": report}, "scoring": {"chosen": "sum"}}})
    assert "| P_RL × F_s | – |" in table and "| P_sub × F_t | 1.000 |" in table


@pytest.mark.parametrize("left", ["outcomes.jsonl", "path_policy.pt", "bandit.npz"])
def test_unrecorded_results_are_not_adopted(tmp_path: Path, left: str) -> None:
    (tmp_path / left).write_text("from a run before run.json existed\n")
    with pytest.raises(ConfigError, match="unrecorded"):
        _claim_run_dir(tmp_path, "obqa", "smollm2-135m", ExperimentConfig())


def test_outcomes_record_every_rule_and_reports_read_the_chosen_one(tmp_path: Path) -> None:
    q = Question("q1", "What purrs?", (Choice("A", "dog"), Choice("B", "cat"), Choice("C", "a big cat")),
                 gold=("C",))
    # sum picks A, the per-token mean picks C, PMI (against the prior) picks B
    scores = ChoiceScores((-2.0, -3.0, -4.5), (-2.0, -3.0, -1.5), token_counts=(1, 1, 3))
    prior = ChoiceScores((-1.0, -5.0, -3.0), (-1.0, -5.0, -1.0))
    inj = Injection(Answer("q1", "A", {"A": 1.0, "B": 0.0, "C": 0.0}), scores)
    row = _row(q, WITHOUT_KG, inj, prior)
    assert (row["correct_sum"], row["correct_mean"], row["correct_pmi"]) == (0, 1, 0)
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    store.put(row)
    for a in ARMS:
        store.put({**row, "setting": a, "correct_pmi": int(a == ARMS[0])})
    bandit = PromptBandit(4, ARMS)
    report = _split_report([q], [WITHOUT_KG, *ARMS], {"full": [ARMS[0]]}, store, bandit, "pmi")
    assert report["without_kg"]["accuracy"] == 0.0
    assert report["without_kg"]["accuracy_by_rule"] == {"sum": 0.0, "mean": 1.0, "pmi": 0.0}
    assert report["combos"][ARMS[0]]["accuracy"] == 1.0 and report["combos"][ARMS[1]]["accuracy"] == 0.0
    assert report["full"]["accuracy"] == 1.0 and report["oracle_any_combo"] == 1.0
    assert _split_report([q], [WITHOUT_KG, *ARMS], {"full": [ARMS[1]]}, store, bandit, "mean"
                         )["full"]["accuracy"] == 1.0


def test_a_letter_backend_records_no_pmi_outcome() -> None:
    """Letter scores have no prior: PMI's correctness is unknown (None), and accuracies over it are NaN."""
    from kgwise.eval.knowgpt import _acc

    q = Question("q1", "What purrs?", (Choice("A", "dog"), Choice("B", "cat")), gold=("B",))
    letter = ChoiceScores((-50.0, 0.0), (-50.0, 0.0), method="letter")
    row = _row(q, WITHOUT_KG, Injection(Answer("q1", "B", {"A": 0.0, "B": 1.0}), letter), None)
    assert (row["correct_sum"], row["correct_mean"], row["correct_pmi"]) == (1, 1, None)
    assert _acc([row], "correct_sum") == 1.0 and math.isnan(_acc([row], "correct_pmi"))


def test_answers_by_letter_are_read_by_letter_and_a_reply_without_one_is_counted_and_named(
        tmp_path: Path) -> None:
    from kgwise.llm.answering import LetterReply

    q = Question("q1", "What purrs?", (Choice("A", "dog"), Choice("B", "cat")), gold=("B",))
    uniform = ChoiceScores((math.log(0.5),) * 2, (math.log(0.5),) * 2, method="letter")
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    for setting, reply in ((WITHOUT_KG, LetterReply(uniform, "", "hmm", "none")),
                           (ARMS[0], LetterReply(uniform, "B", "B", "logprobs"))):
        inj = Injection(Answer("q1", reply.prediction), reply.scores, letter=reply)
        store.put(_row(q, setting, inj, None))
    row = store.need("q1", WITHOUT_KG)
    assert (row["correct_letter"], row["letter_from"], row["correct_sum"]) == (0, "none", None)
    report = _split_report([q], [WITHOUT_KG, ARMS[0]], {"full": [ARMS[0]]}, store, PromptBandit(4, ARMS[:1]),
                           "letter")
    assert report["without_kg"]["accuracy"] == 0.0 and report["without_kg"]["no_letter"] == ["q1"]
    assert report["full"]["accuracy"] == 1.0 and report["combos"][ARMS[0]]["letter_from"] == {"logprobs": 1}


def test_targets_pair_full_with_the_baselines_on_the_same_questions(tmp_path: Path) -> None:
    """Four questions: w/o KG right on 1, the first combination on 3, the bandit's picks on 2."""
    from kgwise.eval.knowgpt import markdown_table

    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(4)]
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    right = {WITHOUT_KG: [1, 0, 0, 0], ARMS[0]: [1, 1, 1, 0]} | {a: [0, 0, 0, 0] for a in ARMS[1:]}
    for setting, flags in right.items():
        for q, ok in zip(qs, flags, strict=True):
            store.put({"qid": q.id, "setting": setting, "correct_sum": ok, "correct_mean": ok,
                       "correct_pmi": ok, "prep_ms": 1.0, "empty_knowledge": 0, "kg_edges": 1})
    picks = [ARMS[0], ARMS[1], ARMS[0], ARMS[1]]  # right, wrong, right, wrong
    report = _split_report(qs, [WITHOUT_KG, *ARMS], {"full": picks}, store, PromptBandit(4, ARMS), "sum")
    t = report["targets"]
    assert t["full_minus_without_kg"] == pytest.approx(0.25)  # differences 0, 0, 1, 0
    assert t["full_minus_without_kg_se"] == pytest.approx(0.25)  # sd 0.5 over √4
    assert t["full_minus_best_single"] == pytest.approx(-0.25)  # differences 0, -1, 0, 0
    assert t["five_points_over_without_kg"] and not t["at_least_best_single"]
    table = markdown_table({"csqa": {"splits": {"ihdev": report}, "scoring": {"chosen": "sum"}}})
    assert "| full − w/o KG (points ± paired SE) | +25.0 ± 25.0 |" in table


def test_outcome_store_resumes_from_its_file(tmp_path: Path) -> None:
    store = OutcomeStore(tmp_path / "run" / "outcomes.jsonl", "run-a")
    store.put({"qid": "q1", "setting": "P_sub+F_t", "correct": 1})
    store.put({"qid": "q1", "setting": WITHOUT_KG, "correct": 0})
    again = OutcomeStore(tmp_path / "run" / "outcomes.jsonl", "run-a")
    assert again.get("q1", "P_sub+F_t") == {"qid": "q1", "setting": "P_sub+F_t", "correct": 1}
    assert again.need("q1", WITHOUT_KG)["correct"] == 0 and len(again.rows()) == 2
    assert again.get("q2", WITHOUT_KG) is None
    with pytest.raises(KeyError, match="q2"):
        again.need("q2", WITHOUT_KG)
    with pytest.raises(ConfigError, match="other settings"):
        OutcomeStore(tmp_path / "run" / "outcomes.jsonl", "run-b")


def test_a_ranked_run_compares_with_a_full_run_question_by_question(tmp_path: Path) -> None:
    ranked, full = tmp_path / "ranked", tmp_path / "full"
    _claim_run_dir(ranked, "obqa", "smollm2-135m", ExperimentConfig(knowledge_tokens=48))
    OutcomeStore(full / "outcomes.jsonl",
                 _claim_run_dir(full, "obqa", "smollm2-135m", ExperimentConfig(knowledge_tokens=None)))
    other = tmp_path / "other"
    with pytest.raises(ConfigError, match="not a `kgwise eval knowgpt` run directory"):
        _other_run(other, ranked)
    OutcomeStore(other / "outcomes.jsonl", _claim_run_dir(other, "obqa", "smollm2-135m", ExperimentConfig(
        knowledge_tokens=None, train_limit=9)))
    with pytest.raises(ConfigError, match="differs in train_limit"):
        _other_run(other, ranked)
    there, budget = _other_run(full, ranked)
    assert budget is None
    old = tmp_path / "old"  # a full run recorded before knowledge_ratio existed: its run.json lacks it
    _claim_run_dir(old, "obqa", "smollm2-135m", ExperimentConfig(knowledge_tokens=None))
    recorded = json.loads((old / "run.json").read_text())
    del recorded["config"]["knowledge_ratio"]
    (old / "run.json").write_text(json.dumps(recorded))
    OutcomeStore(old / "outcomes.jsonl", short_hash(recorded))
    assert _other_run(old, ranked)[1] is None
    here = OutcomeStore(None, "x")  # type: ignore[arg-type]
    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(4)]

    def row(q: Question, setting: str, right: int, chars: int, gold: int = 0) -> dict[str, object]:
        return {"qid": q.id, "setting": setting, "correct_pmi": right, "knowledge_chars": chars,
                "prompt_chars": 100 + chars, "gold_path": gold}

    for i, q in enumerate(qs):
        here.put(row(q, "P_sub+F_t", int(i < 2), 40 + 20, gold=int(i == 0)))  # 20 KG chars after 40 of facts
        here.put(row(q, "facts only", 0, 40))
        if i < 3:  # the full run answered three of them
            there.put(row(q, "P_sub+F_t", int(i < 1), 40 + 100, gold=1))
            there.put(row(q, "facts only", 0, 40))
    got = compare_runs(here, there, {"test": qs}, ["P_sub+F_t", "P_sub+F_s"], "correct_pmi")["test"]
    assert list(got) == ["P_sub+F_t"]  # F_s: no outcome in either run
    c = got["P_sub+F_t"]
    assert c["n"] == 3 and c["here"]["accuracy"] == pytest.approx(2 / 3) and c["there"]["accuracy"] == 1 / 3
    assert c["difference"] == pytest.approx(1 / 3)
    assert c["difference_by_rule"]["pmi"][0] == pytest.approx(1 / 3)
    assert "sum" not in c["difference_by_rule"]  # neither run recorded it
    assert c["here"]["kg_chars"] == 20 and c["there"]["kg_chars"] == 100 and c["kg_chars_fewer"] == 0.8
    assert c["prompt_chars_fewer"] == pytest.approx(1 - 160 / 240)
    assert c["here"]["gold_path_when_correct"] == 0.5 and c["there"]["gold_path_when_correct"] == 1.0


def test_splits_and_facts_only_choose_outcomes_and_keep_the_run() -> None:
    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(3)]
    tests = {"ihdev": qs, "ihtest": qs[:1]}
    assert list(questions_to_test("csqa", tests, ExperimentConfig(splits=("ihdev",), limit=2))) == ["ihdev"]
    assert len(questions_to_test("csqa", tests, ExperimentConfig(splits=("ihdev",), limit=2))["ihdev"]) == 2
    assert list(questions_to_test("csqa", tests, ExperimentConfig())) == ["ihdev", "ihtest"]
    with pytest.raises(ConfigError, match="csqa has no test split dev; its splits: ihdev, ihtest"):
        questions_to_test("csqa", tests, ExperimentConfig(splits=("dev",)))


def test_run_dir_resumes_with_other_splits_or_without_facts_only(tmp_path: Path) -> None:
    first = _claim_run_dir(tmp_path, "obqa", "smollm2-135m", ExperimentConfig())
    other = ExperimentConfig(splits=("test",), facts_only=False, limit=5)
    assert _claim_run_dir(tmp_path, "obqa", "smollm2-135m", other) == first


def test_seconds_per_question_add_the_shared_prior_and_skip_cached_calls() -> None:
    q = Question("q1", "What purrs?", (Choice("A", "dog"), Choice("B", "cat")), gold=("B",))

    def scores(seconds: float, cached: bool = False) -> ChoiceScores:
        usage = Usage(cached_calls=1, latency_s=0.001) if cached else Usage(10, 0, 1, seconds)
        return ChoiceScores((-3.0, -1.0), (-3.0, -1.0), usage)

    def row(score: ChoiceScores, prior: ChoiceScores | None) -> dict[str, object]:
        return _row(q, WITHOUT_KG, Injection(Answer("q1", "B", {"A": 0.0, "B": 1.0}), score), prior)

    timed, cached = row(scores(2.0), scores(0.5)), row(scores(0.0, cached=True), scores(0.0, cached=True))
    assert timed["score_s"] == 2.0 and cached["score_s"] is None
    assert isinstance(timed["load_1min"], float)
    got = _seconds([timed, cached, row(scores(4.0), None)], priors=[0.5, 1.5])
    assert got["score_s_timed"] == 2 and got["score_s_mean"] == 3.0 and got["prior_s_mean"] == 1.0
    assert got["llm_s_per_question"] == 4.0
    assert _seconds([cached], priors=[])["llm_s_per_question"] is None
    assert _seconds([timed], priors=[])["llm_s_per_question"] is None  # the prior came from the cache


def test_accuracy_where_the_knowledge_holds_a_gold_path_is_paired_with_no_kg(tmp_path: Path) -> None:
    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(4)]
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    base = {"correct_sum": 0, "correct_mean": 0, "prep_ms": 1.0, "empty_knowledge": 0, "kg_edges": 3,
            "knowledge_chars": 10, "prompt_chars": 50, "usage": {}}
    for i, q in enumerate(qs):  # a gold path in the knowledge of q0, q1 and q2; right with it on q0, q1
        store.put({**base, "qid": q.id, "setting": "P_sub+F_s", "correct_pmi": int(i < 2),
                   "gold_path": int(i < 3)})
        store.put({**base, "qid": q.id, "setting": WITHOUT_KG, "correct_pmi": int(i == 2), "gold_path": 0})
    report = _split_report(qs, [WITHOUT_KG, "P_sub+F_s"], {"full": ["P_sub+F_s"] * 4}, store,
                           PromptBandit(4, ("P_sub+F_s",)), "pmi")
    got = report["combos"]["P_sub+F_s"]["with_gold_path"]
    assert got == {"n": 3, "accuracy": pytest.approx(2 / 3), "without_kg_accuracy": pytest.approx(1 / 3)}


def test_the_gap_over_no_kg_is_given_under_every_scoring_rule(tmp_path: Path) -> None:
    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(4)]
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    for i, q in enumerate(qs):  # with knowledge: sum right on all four, PMI on one; without: both on two
        store.put({"qid": q.id, "setting": "P_sub+F_s", "correct_sum": 1, "correct_mean": 1,
                   "correct_pmi": int(i == 0), "prep_ms": 1.0, "empty_knowledge": 0, "kg_edges": 1})
        store.put({"qid": q.id, "setting": WITHOUT_KG, "correct_sum": int(i < 2), "correct_mean": 1,
                   "correct_pmi": int(i < 2), "prep_ms": 1.0, "empty_knowledge": 0, "kg_edges": 1})
    report = _split_report(qs, [WITHOUT_KG, "P_sub+F_s"], {"full": ["P_sub+F_s"] * 4}, store,
                           PromptBandit(4, ("P_sub+F_s",)), "pmi")
    gaps = report["targets"]["full_minus_without_kg_by_rule"]
    assert gaps["sum"][0] == pytest.approx(0.5) and gaps["pmi"][0] == pytest.approx(-0.25)
    assert gaps["mean"] == [0.0, 0.0]
    assert report["targets"]["full_minus_without_kg"] == pytest.approx(-0.25)  # the run's rule: PMI


def test_the_prior_seconds_are_what_a_no_kg_answer_spent_beyond_its_scoring_call(tmp_path: Path) -> None:
    qs = [Question(f"q{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(3)]
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    base = {"correct_sum": 1, "correct_mean": 1, "correct_pmi": 1, "prep_ms": 1.0, "empty_knowledge": 0,
            "kg_edges": 1, "load_1min": 2.0}
    plain = [({"calls": 2, "latency_s": 3.0}, 2.0),  # scoring 2 s + prior 1 s
             ({"calls": 1, "latency_s": 2.0}, 2.0),  # the prior was a memo hit: not counted
             ({"calls": 0, "cached_calls": 2, "latency_s": 0.01}, None)]  # the response cache answered
    for q, (usage, score) in zip(qs, plain, strict=True):
        store.put({**base, "qid": q.id, "setting": WITHOUT_KG, "usage": usage, "score_s": score})
        store.put({**base, "qid": q.id, "setting": "P_sub+F_s", "usage": {"calls": 1, "latency_s": 4.0},
                   "score_s": 4.0})
    report = _split_report(qs, [WITHOUT_KG, "P_sub+F_s"], {"full": ["P_sub+F_s"] * 3}, store,
                           PromptBandit(4, ("P_sub+F_s",)), "pmi")
    assert report["without_kg"]["prior_s_mean"] == pytest.approx(1.0)
    assert report["without_kg"]["llm_s_per_question"] == pytest.approx(3.0)
    assert report["combos"]["P_sub+F_s"]["llm_s_per_question"] == pytest.approx(5.0)


def test_auto_scoring_chooses_each_settings_rule_on_its_own_training_answers(tmp_path: Path) -> None:
    """Recorded choice scores of four training questions (gold: the first of two one-token choices),
    answered without and with knowledge, and each question's prior (after a bare ``Answer:``). Without
    knowledge PMI is right on three and the sum on one; with it the sum is right on all four and PMI on
    two (where the prior already favours the gold choice, PMI takes the knowledge's lift back). So the
    w/o-KG rule is PMI, the knowledge rule the sum, and test outcomes are read by each setting's own."""
    from kgwise.eval.knowgpt import SettingRules, best_rule, choose_rules

    qs = [Question(f"t{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(4)]
    prior_lead = [-4.0, -4.0, 2.0, 2.0]  # log P(gold) − log P(rival) after a bare "Answer:"

    def recorded(setting: str, leads: list[float]) -> list[dict[str, object]]:
        """Outcomes of scores where the gold choice leads the rival (−3.0) by ``leads``."""
        rows = []
        for q, lead, p in zip(qs, leads, prior_lead, strict=True):
            scores, prior = ChoiceScores((-3.0 + lead, -3.0), (-3.0 + lead, -3.0)), ChoiceScores(
                (-3.0 + p, -3.0), (-3.0 + p, -3.0))
            rows.append(_row(q, setting, Injection(Answer(q.id, "A", {"A": 1.0, "B": 0.0}), scores), prior))
        return rows

    plain = recorded(WITHOUT_KG, [-3.0, -1.0, -1.0, 3.0])
    known = recorded("P_sub+F_s", [1.0, 1.0, 1.0, 1.5])
    right = {rule: ([r[f"correct_{rule}"] for r in plain], [r[f"correct_{rule}"] for r in known])
             for rule in ("sum", "pmi")}
    assert right == {"sum": ([0, 0, 0, 1], [1, 1, 1, 1]), "pmi": ([1, 1, 0, 1], [1, 1, 0, 0])}
    rules, report = choose_rules(plain, known)
    assert rules == SettingRules("pmi", "sum")
    assert report["chosen"] == {"without_kg": "pmi", "knowledge": "sum"}
    assert report["train_accuracy"]["without_kg"] == {"sum": 0.25, "mean": 0.25, "pmi": 0.75}
    assert report["train_accuracy"]["knowledge"]["sum"] == 1.0
    assert report["train_accuracy"]["knowledge"]["pmi"] == 0.5
    assert best_rule([{"correct_sum": 1, "correct_mean": 1, "correct_pmi": 1}])[0] == "sum"  # first of equals
    assert best_rule([{"correct_sum": 0, "correct_mean": 0, "correct_pmi": None}])[0] == "sum"  # no PMI value
    with pytest.raises(ConfigError, match="no training outcomes"):
        choose_rules([], known)

    # the test split: each setting read by its own rule, the gap paired across the two rules
    store = OutcomeStore(tmp_path / "outcomes.jsonl", "run")
    for row in (*plain, *known):
        store.put({**row, "prep_ms": 1.0})
    report_split = _split_report(qs, [WITHOUT_KG, "P_sub+F_s"], {"full": ["P_sub+F_s"] * 4}, store,
                                 PromptBandit(4, ("P_sub+F_s",)), rules)
    assert report_split["without_kg"]["accuracy"] == 0.75  # PMI
    assert report_split["combos"]["P_sub+F_s"]["accuracy"] == 1.0 and report_split["full"]["accuracy"] == 1.0
    t = report_split["targets"]
    assert t["full_minus_without_kg"] == pytest.approx(0.25)  # 1 − 0.75; under one rule, PMI: 0.5 − 0.75
    assert t["full_minus_without_kg_by_rule"]["pmi"][0] == pytest.approx(-0.25)
    assert t["full_minus_without_kg_95"][0] < 0.25 < t["full_minus_without_kg_95"][1]
    table = markdown_table({"csqa": {"splits": {"ihdev": report_split}, "scoring": report}})
    assert "| choice scoring | w/o KG pmi, with knowledge sum |" in table


def test_auto_scoring_measures_both_settings_on_the_training_questions() -> None:
    """The knowledge rule is chosen on the combinations' training answers, so ``auto`` measures them even
    when a saved bandit needs no retraining; a fixed rule does not."""
    from kgwise.eval.knowgpt import _needed

    train = [Question(f"t{i}", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",)) for i in range(2)]
    test = {"ihdev": [Question("d0", "?", (Choice("A", "a"), Choice("B", "b")), gold=("A",))]}
    settings = [WITHOUT_KG, "P_sub+F_s"]
    auto = ExperimentConfig(scoring="auto", combos=("P_sub+F_s",))
    got = [(q.id, s) for q, s in _needed(train, test, settings, auto, retrain=False)]
    assert got == [("t0", WITHOUT_KG), ("t0", "P_sub+F_s"), ("t1", WITHOUT_KG), ("t1", "P_sub+F_s"),
                   ("d0", WITHOUT_KG), ("d0", "P_sub+F_s")]
    pmi = replace(auto, scoring="pmi")
    fixed = [(q.id, s) for q, s in _needed(train, test, settings, pmi, retrain=False)]
    assert fixed == [("d0", WITHOUT_KG), ("d0", "P_sub+F_s")]
