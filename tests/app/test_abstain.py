"""Abstention (``[answer_sets] abstain``): the config key, the per-arm rule on a held-out calibration, the
answer's "not sure" with its reason, the live counts in ``status`` and the calibration file round trip."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.abstain import NOT_SURE, decide
from kgwise.app.calibration import HeldOutCalibration, stale
from kgwise.app.config import AnswerSetConfig, PipelineConfig
from kgwise.app.fit import fit
from kgwise.app.fit_log import fit_log
from kgwise.errors import DataError

from .conftest import STUB_CONFIG, dev_rows, write_config, write_kg, write_questions
from .test_pipeline import make, question


def calibration(n: int, tune: int, accuracy: float, seed: int = 0) -> HeldOutCalibration:
    """``n`` held-out and ``tune`` router questions for two arms, ``a`` right on ``accuracy`` of them
    (its confident answers first), ``b`` never answering."""
    rng = np.random.default_rng(seed)

    def part(m: int) -> tuple[np.ndarray, np.ndarray]:
        conf = np.full((m, 2), np.nan)
        conf[:, 0] = rng.uniform(0.3, 1.0, m)
        ok = np.zeros((m, 2), dtype=bool)
        ok[:, 0] = rng.random(m) < np.where(conf[:, 0] > 0.5, 1.0, accuracy)
        return conf, ok

    conf, ok = part(n)
    tconf, tok = part(tune)
    return HeldOutCalibration(("a", "b"), "lac", np.zeros((n, 1)), np.zeros((n, 2)), np.zeros((n, 2)), {},
                              conf, ok, tconf, tok)


def test_the_config_key_is_validated_with_file_line_and_key(tmp_path: Path) -> None:
    write_kg(tmp_path)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=1.0, seed=0)
    ok = PipelineConfig.load(write_config(tmp_path, body + "abstain = true\n"))
    assert ok.answer_sets.abstain and not AnswerSetConfig().abstain
    path = write_config(tmp_path, body + 'abstain = "yes"\n', "bad.toml")
    with pytest.raises(DataError, match=r"answer_sets\.abstain: must be true or false") as err:
        PipelineConfig.load(path)
    assert f"{path}:{len(body.splitlines()) + 1}" in str(err.value)


def test_an_arm_with_enough_questions_answers_its_confident_questions_with_a_promise() -> None:
    cal = calibration(200, 200, 0.3)
    sets = AnswerSetConfig(alpha=0.2, abstain=True)
    sure = decide(cal, "a", None, sets, {"A": 0.95, "B": 0.05}, "A")
    assert not sure.abstained and sure.threshold is not None and "accuracy ≥ 0.8" in sure.promise
    unsure = decide(cal, "a", None, sets, {"A": 0.31, "B": 0.69}, "A")
    assert unsure.abstained and unsure.promise.startswith("not sure: its probability is 0.31, below")


def test_agreement_counts_where_the_tuning_answers_say_it_helps() -> None:
    sets = AnswerSetConfig(alpha=0.2, abstain=True)
    # b never agreed in this calibration's confidences: the rule orders by a's probability alone
    blind = replace(calibration(200, 200, 0.3), witnesses=("b",))
    alone = decide(blind, "a", None, sets, {"A": 0.31, "B": 0.69}, "A", {"b": "A"})
    assert alone.abstained and alone.confidence == pytest.approx(0.31)
    assert alone.promise.startswith("not sure: its probability is 0.31, below arm 'a''s certified threshold")
    # here b agrees exactly when a is right: agreement first, b's agreement clears the threshold whatever
    # a's probability
    rng = np.random.default_rng(1)

    def part(m: int) -> tuple[np.ndarray, np.ndarray]:
        ok = np.zeros((m, 2), dtype=bool)
        ok[:, 0] = rng.random(m) < 0.6
        conf = np.full((m, 2), np.nan)
        conf[:, 0] = ok[:, 0] + rng.uniform(0.3, 1.0, m)
        return conf, ok

    (conf, ok), (tconf, tok) = part(200), part(200)
    told = HeldOutCalibration(("a", "b"), "lac", np.zeros((200, 1)), np.zeros((200, 2)), np.zeros((200, 2)),
                              {}, conf, ok, tconf, tok, ("b",))
    agreed = decide(told, "a", None, sets, {"A": 0.31, "B": 0.69}, "A", {"b": "A"})
    assert not agreed.abstained and agreed.confidence == pytest.approx(1.31)
    assert "among the questions answered (its probability ≥ 0." in agreed.promise
    assert ", or ≥ 1 of b agrees with it), with probability ≥ 0.95" in agreed.promise
    unsure = decide(told, "a", None, sets, {"A": 0.5, "B": 0.5}, "A", {"b": "B"})
    assert unsure.abstained
    assert unsure.promise.startswith("not sure: 0 of b agree with it and its probability is 0.5, below")
    assert decide(told, "b", None, sets, {"A": 0.9}, "A", {"b": "A"}).promise.startswith("not sure: arm 'b'")


def test_too_few_questions_give_the_number_needed_and_no_answers_at_all_say_so() -> None:
    cal = calibration(6, 50, 1.0)
    sets = AnswerSetConfig(alpha=0.2, abstain=True)
    few = decide(cal, "a", None, sets, {"A": 0.9}, "A")
    assert few.abstained and "6 of the held-out dev questions it answered (the arm is forced" in few.promise
    assert "needs about 14 (8 more)" in few.promise  # (0.8)^14 ≤ 0.05 < (0.8)^13
    assert few.promise.endswith("α = 0.4 is the smallest (in steps of 0.05) they certify now")  # 0.6^6 ≤ .05
    routed = decide(cal, "a", np.full(6, 1), sets, {"A": 0.9}, "A")  # the router sends none to it
    assert routed.abstained and "0 of the held-out dev questions the router, as it stands" in routed.promise
    never = decide(cal, "b", None, sets, {"A": 0.9}, "A")
    assert never.abstained and "arm 'b' answered none of the 50" in never.promise
    old = HeldOutCalibration(("a", "b"), "lac", np.zeros((3, 1)), np.zeros((3, 2)), np.zeros((3, 2)))
    assert "predates abstention" in decide(old, "a", None, sets, {"A": 0.9}, "A").promise


def test_the_calibration_file_keeps_what_abstention_needs(tmp_path: Path) -> None:
    cal = replace(calibration(20, 30, 0.5), witnesses=("b",))
    cal.save(tmp_path / "cal.json")
    back = HeldOutCalibration.load(tmp_path / "cal.json")
    assert back.witnesses == ("b",)
    assert back.can_abstain and back.confidence is not None and cal.confidence is not None
    assert np.array_equal(back.confidence, cal.confidence, equal_nan=True)
    assert back.correct is not None and cal.correct is not None and np.array_equal(back.correct, cal.correct)
    assert back.tune_correct is not None and cal.tune_correct is not None
    assert np.array_equal(back.tune_correct, cal.tune_correct)
    with pytest.raises(DataError, match="tune_confidence"):
        HeldOutCalibration(("a",), "lac", np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)), {},
                           np.zeros((2, 1)), np.zeros((2, 1), bool), np.zeros((3, 2)), np.zeros((3, 2), bool))


def test_answers_carry_the_abstention_and_status_counts_it_live(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(6))
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        pipe.config = replace(pipe.config, answer_sets=AnswerSetConfig(alpha=0.2, abstain=True))
        fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        results = [pipe.answer(*question(i)) for i in range(12)]
        for r in results:
            assert r.abstention is not None and r.abstained == r.abstention.abstained
            assert (r.answer == NOT_SURE) == r.abstained
            assert r.abstention.promise.startswith("not sure: ") == r.abstained
            pipe.feedback(r.decision, correct=True)
        status = pipe.status().abstention
        assert sum(s.asked for s in status.values()) == 12
        assert sum(s.answered for s in status.values()) == sum(not r.abstained for r in results)
        assert all(s.graded == s.answered and s.correct == s.graded for s in status.values())
        assert pipe.status().to_dict()["abstention"]


def test_each_reason_for_not_sure_is_the_real_one(tmp_path: Path) -> None:
    """Stale calibration (other arm settings, another KG, other witnesses), named in answers and status."""
    path = write_questions(tmp_path, dev_rows(2))
    abstaining = AnswerSetConfig(alpha=0.2, abstain=True)
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        pipe.config = replace(pipe.config, answer_sets=abstaining)
        fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        cal, where = pipe.state.calibration, pipe.state.calibration_file
        assert cal is not None and cal.witnesses == ("free",) and stale(cal, pipe.config, where) is None
        blind = replace(pipe.config, router=replace(pipe.config.router, observe_free=False))
        why = stale(cal, blind, where)
        assert why is not None
        assert "confidences counting the agreement of free, which the pipeline no longer asks" in why
        (tmp_path / "kg.tsv").write_text("aspirin\ttreats\tpain\n", encoding="utf-8")
        why = stale(cal, pipe.config, where)
        assert why is not None and "another KG than [kg] of" in why and why.endswith("run `kgwise fit` again")
    with make(tmp_path, cheap=0.2, dear=0.3, budget=100.0) as pipe:  # the cheap arm's price changed
        pipe.config = replace(pipe.config, answer_sets=abstaining)
        r = pipe.answer(*question(0))
        assert r.abstained and r.answer == NOT_SURE and r.abstention is not None
        assert r.abstention.promise.startswith("not sure: ") and "other arm settings" in r.abstention.promise
        assert "other arm settings" in (pipe.status().calibration_problem or "")


def test_a_graded_log_missing_an_arm_is_refused_and_nothing_is_fitted(tmp_path: Path) -> None:
    log = tmp_path / "graded.jsonl"
    log.write_text("".join(json.dumps({"id": f"q{i}", "text": question(i)[0], "arms": {
        "cheap": {"answer": "A", "correct": True, "cost": 0.1},
        "dear": {"answer": "A", "correct": True, "cost": 0.3}}}) + "\n" for i in range(8)), encoding="utf-8")
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        with pytest.raises(DataError, match=r"grades no outcome of arm\(s\) free of .*kgwise.toml") as err:
            fit_log(pipe, log, echo=lambda _: None)
        assert str(log) in str(err.value)
        assert pipe.state.calibration is None and pipe.status().spent == 0.0
