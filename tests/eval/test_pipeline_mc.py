"""``kgwise.eval.pipeline_mc``: a graded log's multiple-choice sets replayed by ``eval pipeline --log``
give the live path's coverage check on the same answers, and a log whose probabilities cannot be
replayed is refused naming the file, the line and the field. Real pipelines; the arms and the question
encoder are ``test_pipeline_live``'s test doubles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.eval.test_pipeline_live import FakeEncoder, _arms, _questions

from kgwise.datasets.user import ArmOutcome, GradedLog, GradedQuestion, write_graded_log
from kgwise.errors import ConfigError, DataError
from kgwise.eval.pipeline_live import LiveMCConfig, coverage_splits, question_key
from kgwise.eval.pipeline_mc import attainable_sets, mc_log, read_mc_log, replay_mc_sets
from kgwise.eval.route.logs import read_replay
from kgwise.route.coke import CokeConfig
from kgwise.types import Question

SPECS = ["kgm:KGM", "small:LLM", "big:LLM"]


def _live_answers(questions: list[Question]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every test-double arm's answer on every question, as the live run logs them."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, arm in _arms().items():
        out[name] = {}
        for q in questions:
            a = arm.answer(q)
            out[name][question_key(q)] = {"prediction": a.prediction, "probabilities": a.probabilities,
                                  "usage": a.usage.to_dict()}
    return out


def _graded(questions: list[Question], answers: dict[str, dict[str, dict[str, Any]]]) -> GradedLog:
    """The same answers as a graded log (cost in calls, as ``--live`` writes it), choice texts dropped."""
    rows = []
    for q in questions:
        arms = {n: ArmOutcome(r["prediction"], r["prediction"] == q.gold[0],
                              float(r["usage"]["calls"]), probabilities=r["probabilities"])
                for n, r in ((n, answers[n][question_key(q)]) for n in answers)}
        rows.append(GradedQuestion(q.id, q.text, arms, q.gold[0]))
    return GradedLog(tuple(rows), tuple(answers))


def test_the_log_replay_gives_the_live_paths_sets_on_the_same_answers(tmp_path: Path) -> None:
    """Each split's pipeline draws its decision and fit ids from the split's seed (the held-out questions'
    re-routing draws with the decision id), so two runs on the same answers agree to the digit."""
    questions = [*_questions("fit", 20), *_questions("test", 20)]
    answers = _live_answers(questions)
    coke = CokeConfig()
    cfg = LiveMCConfig(20, 20, alphas=(0.2, 0.3), budget=0.6, seed=3, coke=coke)
    live = coverage_splits(questions, [a.config for a in _arms().values()], answers, FakeEncoder(), cfg, 4,
                           tmp_path / "live")
    again = coverage_splits(questions, [a.config for a in _arms().values()], answers, FakeEncoder(), cfg, 4,
                            tmp_path / "again")
    assert again == live
    path = tmp_path / "graded.jsonl"
    write_graded_log(path, _graded(questions, answers))
    mc = read_mc_log(path, read_replay(path, SPECS))
    assert mc is not None
    replayed = replay_mc_sets(mc, FakeEncoder(), (0.2, 0.3), 0.6, 4, 3, coke, cfg.delta, str(path))
    assert replayed["left_out"] == 0
    assert {k: replayed[k] for k in live} == live  # every figure, to the digit
    assert live["pac"]["mean_set_size"]["0.2"] > 0  # sets were made, not skipped


def test_a_draw_of_a_newcomers_size_and_the_fallback_on_all_dev_questions_are_reported(tmp_path: Path
                                                                                      ) -> None:
    questions = _questions("q", 40)
    answers = _live_answers(questions)
    path = tmp_path / "graded.jsonl"
    write_graded_log(path, _graded(questions, answers))
    mc = read_mc_log(path, read_replay(path, SPECS))
    assert mc is not None
    got = replay_mc_sets(mc, FakeEncoder(), (0.2,), 0.6, 2, 0, CokeConfig(), 0.05, str(path), draw=(16, 12))
    assert got["fit"] == 16 and got["test"] == 12
    all_dev = got["fallback_all_dev"]["pac"]
    assert set(all_dev) == set(got["pac"]) and 1.0 <= all_dev["mean_set_size"]["0.2"] <= 4.0
    with pytest.raises(ConfigError, match="30 fit \\+ 12 test questions per split do not fit in its 40"):
        replay_mc_sets(mc, FakeEncoder(), (0.2,), 0.6, 1, 0, CokeConfig(), 0.05, str(path), draw=(30, 12))


def test_labels_other_than_a_b_c_map_onto_the_pipelines_and_open_questions_are_counted(tmp_path: Path
                                                                                         ) -> None:
    questions = _questions("q", 12)
    answers = _live_answers(questions)
    log = _graded(questions, answers)
    to = dict(zip("ABCD", ["w", "x", "y", "z"], strict=True))
    renamed = [GradedQuestion(q.id, q.text, {n: ArmOutcome(to[o.answer], o.correct, o.cost, probabilities={
        to[k]: p for k, p in (o.probabilities or {}).items()}) for n, o in q.arms.items()}, to[str(q.gold)])
        for q in log.questions]
    open_q = GradedQuestion("open", "who wrote it?", {n: ArmOutcome("x", False, 1.0) for n in answers})
    path = tmp_path / "renamed.jsonl"
    write_graded_log(path, GradedLog((*renamed, open_q), log.arms))
    replay = read_replay(path, SPECS)
    mc = mc_log(GradedLog((*renamed, open_q), log.arms), replay.table, str(path))
    assert mc is not None and mc.left_out == ["open"]
    for q, mq in zip(questions, mc.questions, strict=True):
        assert mq.gold == q.gold and [c.text for c in mq.choices] == ["w", "x", "y", "z"]
        for n in answers:
            mine, logged = mc.answers[n][question_key(mq)], answers[n][question_key(q)]
            assert mine["probabilities"] == logged["probabilities"]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(qid: str, gold: str | None = "A", **probs: dict[str, float] | None) -> dict[str, Any]:
    arms = {}
    for name, cost in (("kgm", 0), ("small", 1)):
        p = probs.get(name, {"A": 0.7, "B": 0.3})
        arms[name] = {"answer": "A", "correct": gold == "A", "cost": cost,
                      **({} if p is None else {"probabilities": p})}
    return {"id": qid, "text": f"question {qid}?", "arms": arms, **({} if gold is None else {"gold": gold})}


@pytest.mark.parametrize("bad, match", [
    (_row("q3", small=None), r"bad\.jsonl:4: arms\.small\.probabilities missing while arms\.kgm gives them"),
    (_row("q3", gold=None), r"bad\.jsonl:4: field 'gold' missing"),
    (_row("q3", small={"A": 0.5, "C": 0.5}), r"bad\.jsonl:4: the arms' probabilities name different choices"),
    (_row("q3", gold="C"), r"bad\.jsonl:4: gold 'C' is not one of the choices"),
    (_row("q3", small={"A": 0.5, "B": 0.7}), r"bad\.jsonl:4: arms\.small\.probabilities sums to 1\.2000"),
])
def test_a_log_whose_probabilities_do_not_fit_its_choices_is_refused_with_file_line_and_field(
        tmp_path: Path, bad: dict[str, Any], match: str) -> None:
    rows = [_row(f"q{i}") for i in range(3)]
    path = _write(tmp_path / "bad.jsonl", [*rows, bad, _row("q4")])
    with pytest.raises(DataError, match=match):
        read_mc_log(path, read_replay(path, ["kgm:KGM", "small:LLM"]))


def test_an_arm_without_probabilities_in_the_whole_log_is_replayed_as_letter_replies(tmp_path: Path) -> None:
    """A hosted arm whose replies were parsed for a letter: all mass on its answer (uniform when it gave
    none), as the live pipeline answers such a reply; counted; an answer outside the choices refused."""
    rows = [_row(f"q{i}") for i in range(5)]
    for r, said in zip(rows, ["A", "B", "", "A", "B"], strict=True):
        r["arms"]["hosted"] = {"answer": said, "correct": said == "A", "cost": 3}
    path = _write(tmp_path / "log.jsonl", rows)
    specs = ["kgm:KGM", "small:LLM", "hosted:LLM"]
    mc = read_mc_log(path, read_replay(path, specs))
    assert mc is not None and mc.answer_only == {"hosted": 5} and mc.left_out == []
    got = [mc.answers["hosted"][question_key(q)] for q in mc.questions]
    assert [g["probabilities"] for g in got[:3]] == [{"A": 1.0, "B": 0.0}, {"A": 0.0, "B": 1.0},
                                                     {"A": 0.5, "B": 0.5}]
    assert [g["prediction"] for g in got[:3]] == ["A", "B", ""]
    assert mc.answers["small"][question_key(mc.questions[0])]["probabilities"] == {"A": 0.7, "B": 0.3}
    rows[3]["arms"]["hosted"] = {"answer": "C", "correct": False, "cost": 3}
    bad = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError, match=r"bad\.jsonl:4: arms\.hosted\.answer 'C' is not one of the choices"):
        read_mc_log(bad, read_replay(bad, specs))


def test_a_log_without_probabilities_has_no_sets_and_one_with_too_few_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "open.jsonl", [_row(f"q{i}", gold=None, kgm=None, small=None) for i in range(5)])
    assert read_mc_log(path, read_replay(path, ["kgm:KGM", "small:LLM"])) is None
    opened = [_row(f"o{i}", gold=None, kgm=None, small=None) for i in range(3)]
    few = _write(tmp_path / "few.jsonl", [*(_row(f"q{i}") for i in range(3)), *opened])
    with pytest.raises(ConfigError, match=r"few\.jsonl: 3 multiple-choice questions; the splits need ≥ 4"):
        read_mc_log(few, read_replay(few, ["kgm:KGM", "small:LLM"]))


def test_attainable_sets_are_the_top_k_accuracy_and_the_smallest_covering_threshold(tmp_path: Path) -> None:
    # kgm puts gold first on q0, q1, second on q2, q3, last on q4 (p of A, the gold, falls)
    ps = [{"A": 0.7, "B": 0.2, "C": 0.1}, {"A": 0.5, "B": 0.3, "C": 0.2}, {"A": 0.35, "B": 0.55, "C": 0.1},
          {"A": 0.3, "B": 0.6, "C": 0.1}, {"A": 0.1, "B": 0.3, "C": 0.6}]
    rows = [_row(f"q{i}", kgm=p, small={"A": 0.6, "B": 0.3, "C": 0.1}) for i, p in enumerate(ps)]
    path = _write(tmp_path / "log.jsonl", rows)
    mc = read_mc_log(path, read_replay(path, ["kgm:KGM", "small:LLM"]))
    assert mc is not None
    got = attainable_sets(mc, 0.2)["per_arm"]
    assert got["kgm"]["top_k_accuracy"] == {"1": 0.4, "2": 0.8, "3": 1.0}
    # LAC: covering 4 of 5 needs t = 1 − 0.3 = 0.7, which keeps choices with p ≥ 0.3: 1, 2, 2, 2, 2
    assert got["kgm"]["smallest_mean_size_covering"] == pytest.approx(9 / 5)
    assert got["small"]["top_k_accuracy"]["1"] == 1.0 and got["small"]["smallest_mean_size_covering"] == 1.0


LOG_15B = Path(__file__).parents[1] / "data" / "logs" / "obqa-local-probs-1.5b.jsonl"


@pytest.mark.slow  # MiniLM embeds the questions; two fresh pipelines per split
def test_the_command_reports_a_recorded_logs_sets_and_refuses_a_bad_one_before_replaying(tmp_path: Path
                                                                                         ) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    runner = CliRunner()
    arms = ["--arm", "kgm:KGM", "--arm", "qwen2.5-coder-1.5b:LLM", "--arm", "qwen2.5-coder-1.5b+kg:LLM"]
    out = tmp_path / "rep.json"
    res = runner.invoke(app, ["eval", "pipeline", "--log", str(LOG_15B), *arms, "--limit", "16", "--splits",
                              "1", "--alphas", "0.2", "--json", str(out)])
    assert res.exit_code == 0, res.output
    mc = json.loads(out.read_text())["multiple_choice_sets"]
    assert mc["questions"] == 16 and mc["splits"] == 1 and set(mc["arm_accuracy"]) == {
        "kgm", "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b+kg"}
    assert 1.0 <= mc["pac"]["mean_set_size"]["0.2"] <= 4.0
    assert mc["attainable"]["0.2"]["per_arm"]["kgm"]["top_k_accuracy"]["4"] == 1.0
    rows = [json.loads(line) for line in LOG_15B.read_text().splitlines()[:6]]
    del rows[4]["arms"]["qwen2.5-coder-1.5b+kg"]["probabilities"]
    bad = _write(tmp_path / "bad.jsonl", rows)
    res = runner.invoke(app, ["eval", "pipeline", "--log", str(bad), *arms, "--splits", "1", "--json",
                              str(tmp_path / "bad.json")])
    assert res.exit_code != 0
    assert "bad.jsonl:5: arms.qwen2.5-coder-1.5b+kg.probabilities missing" in res.output
    assert not (tmp_path / "bad.json").exists()


LOG_CSQA_15B = Path(__file__).parents[1] / "data" / "logs" / "csqa-local-probs-1.5b.jsonl"
ARMS_15B = ["kgm:KGM", "smollm2-135m:LLM", "smollm2-135m+kg:LLM", "qwen2.5-coder-1.5b:LLM",
            "qwen2.5-coder-1.5b+kg:LLM"]


@pytest.mark.slow  # MiniLM embeds the questions; two fresh pipelines per split
def test_the_recorded_csqa_log_replays_its_five_choice_sets_through_the_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    out = tmp_path / "rep.json"
    arms = [x for spec in ARMS_15B for x in ("--arm", spec)]
    res = CliRunner().invoke(app, ["eval", "pipeline", "--log", str(LOG_CSQA_15B), *arms, "--limit", "20",
                                   "--splits", "1", "--alphas", "0.2", "--json", str(out)])
    assert res.exit_code == 0, res.output
    mc = json.loads(out.read_text())["multiple_choice_sets"]
    assert mc["questions"] == 20 and set(mc["arm_accuracy"]) == {s.split(":")[0] for s in ARMS_15B}
    assert 1.0 <= mc["pac"]["mean_set_size"]["0.2"] <= 5.0
    for arm in mc["arm_accuracy"]:  # five choices: the top five always hold the gold, the top four not
        top = mc["attainable"]["0.2"]["per_arm"][arm]["top_k_accuracy"]
        assert top["5"] == 1.0 and "6" not in top
