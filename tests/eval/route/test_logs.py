"""The one door: a graded log and WebQSP's recorded arms are read by the same code and give the same
reports; what each field of a log feeds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgwise.datasets.user import read_graded_log, write_graded_log
from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.pipeline import PipelineEvalConfig, replay_report
from kgwise.eval.route.experiment import RouteExperimentConfig
from kgwise.eval.route.export import webqsp_graded_log
from kgwise.eval.route.learned import LearnedConfig
from kgwise.eval.route.logs import (
    GradedReplay,
    arm_lines,
    graded_replay,
    question_form,
    read_replay,
    webqsp_replay,
)
from kgwise.eval.route.replay import rearev_candidates, webqsp_table
from kgwise.eval.route.report import RouteReportConfig, route_report
from kgwise.route.table import free_signal_row


def _log(tmp_path: Path, lines: list[dict[str, Any]]) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _without_provenance(x: Any) -> Any:
    """A report without where its questions came from and without timings."""
    if isinstance(x, dict):
        return {k: _without_provenance(v) for k, v in x.items()
                if k not in ("dataset", "coverage", "notes", "ms_per_question", "seconds")}
    if isinstance(x, list):
        return [_without_provenance(v) for v in x]
    return x


def _same(a: GradedReplay, b: GradedReplay) -> None:
    assert a.table.qids == b.table.qids and a.table.arms == b.table.arms
    assert a.table.reported == b.table.reported
    assert np.array_equal(a.table.correct, b.table.correct) and np.array_equal(a.table.cost, b.table.cost)
    assert list(a.free) == list(b.free)
    for name in a.free:
        assert list(a.free[name][0]) == list(b.free[name][0])
        assert np.array_equal(a.free[name][1], b.free[name][1])
    assert a.signals is not None and b.signals is not None and np.array_equal(a.signals, b.signals)
    assert a.feature_names == b.feature_names and np.array_equal(a.features, b.features)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def webqsp_both(data_dir: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[GradedReplay, GradedReplay]:
    log, lines, _ = webqsp_graded_log(data_dir)
    path = tmp_path_factory.mktemp("log") / "webqsp.jsonl"
    write_graded_log(path, log)
    specs = [f"{name}:{cluster}:{acc!r}" for name, cluster, acc in lines]
    return webqsp_replay(data_dir), read_replay(path, specs)


def test_webqsp_through_its_graded_log_file_is_the_built_in_replay(
        webqsp_both: tuple[GradedReplay, GradedReplay], data_dir: Path) -> None:
    built_in, own = webqsp_both
    _same(built_in, own)
    # and it is the recorded outcomes the experiments always replayed: same table, same free signals
    ref, _ = webqsp_table(data_dir)
    assert built_in.table.qids == ref.qids and np.array_equal(built_in.table.correct, ref.correct)
    tops = [[c[0] if c else ("", 0.0) for c in rearev_candidates(data_dir, ref, a)]
            for a in ("ReaRev-lmsr", "ReaRev-sbert")]  # the two ReaRev GNNs' recorded top candidates
    expected = [free_signal_row(list(pair)) for pair in zip(*tops, strict=True)]
    assert np.array_equal(built_in.signals, expected)  # type: ignore[arg-type]
    assert built_in.free_arms == ["ReaRev-lmsr", "ReaRev-sbert"]
    # every signals value reaches the predictor's features, not only the first
    assert "ReaRev-lmsr.signal[3]" in built_in.feature_names


@pytest.mark.slow
def test_eval_pipeline_and_eval_route_report_the_same_both_ways(webqsp_both: tuple[GradedReplay, GradedReplay]
                                                                ) -> None:
    built_in, own = (r.head(200) for r in webqsp_both)
    encoder = MiniLM()
    cfg = PipelineEvalConfig(budget=0.6, splits=2, budget_of="best", context="question+free")
    a = replay_report(built_in, encoder, cfg, dataset="webqsp")
    b = replay_report(own, encoder, cfg, dataset="log")
    assert a["config"]["free_arms"] == ["ReaRev-lmsr", "ReaRev-sbert"]
    assert _without_provenance(a) == _without_provenance(b)
    exp = RouteExperimentConfig(budget_fraction=0.6, seeds=2, budget_of="best", slow_baselines=False)
    route = RouteReportConfig(exp, sensitivity=False, tune=False, learned_config=LearnedConfig(splits=1))
    ra = route_report(built_in, encoder, route, is_log=False)
    rb = route_report(own, encoder, route, is_log=True)
    assert ra["hindsight_cascade"] is not None and ra["learned"]["runs"]
    assert _without_provenance(ra) == _without_provenance(rb)


def test_usage_is_priced_by_the_arms_exact_name(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"id": f"q{i}", "text": f"question {i}?", "arms": {
        "gpt-4": {"answer": "a", "correct": True, "usage": {"input_tokens": 1000, "output_tokens": 500}},
        "kg": {"answer": "b", "correct": False, "cost": 0, "signals": [0.9, 0.1, 0.5]}}} for i in range(3)]
    replay = read_replay(_log(tmp_path, rows), ["gpt-4:LLM:0.8", "kg:KGM:0.5"])
    assert replay.table.cost[0, 0] == pytest.approx((1000 * 30 + 500 * 60) / 1e6)
    assert replay.free_arms == ["kg"] and replay.signals is not None
    assert replay.signals[0].tolist() == [1.0, 0.9, 0.9]  # one free arm: it agrees with itself
    assert [n for n in replay.feature_names if n.startswith("kg.")] == [f"kg.signal[{k}]" for k in range(3)]
    rows[0]["arms"]["rogue-model"] = rows[0]["arms"].pop("gpt-4")
    log = _log(tmp_path, rows[:1])
    with pytest.raises(ConfigError, match=r"'rogue-model'.*never by prefix.*KGWISE_PRICES"):
        graded_replay(read_graded_log(log), arm_lines(["rogue-model:LLM:0.5", "kg:KGM"]), str(log))


def test_arm_lines_read_from_the_right_and_refuse_bad_ones() -> None:
    assert arm_lines(["openai:gpt-4o:LLM:0.8"])[0].name == "openai:gpt-4o"
    for bad in (["a:XYZ"], ["a:LLM:x"], ["a:LLM", "a:KGM"], []):
        with pytest.raises(ConfigError):
            arm_lines(bad)


def test_question_form_reads_the_wording() -> None:
    f = question_form("What country bordering France has the capital Madrid and uses the Euro?")
    assert f[0] == pytest.approx(12 / 20) and f[3] == 1.0 and f[-1] == 1.0  # words, 'what', two clauses
    assert question_form("Who wrote Hamlet in 1600?")[2] == 1.0  # a number


def test_the_kept_local_log_goes_through_the_door() -> None:
    path = Path(__file__).parents[2] / "data" / "logs" / "obqa-local.jsonl"
    arms = ["kgm:KGM", "smollm2-135m:LLM", "smollm2-135m+kg:LLM", "gemma3-270m:LLM", "gemma3-270m+kg:LLM"]
    replay = read_replay(path, arms)
    assert replay.coverage["left_out"] == 0 and replay.table.n_questions >= 100
    assert replay.free_arms == ["kgm"]  # free: 0 calls on every question
    assert set(np.unique(replay.table.cost[:, 1:])) == {2.0}  # PMI scoring: two calls a question
    # every arm's choice confidence reaches the predictor's features (paid arms': the cascade's)
    assert {f"{a.split(':')[0]}.signal[2]" for a in arms} <= set(replay.feature_names)
    # the KG model is the most accurate arm and free: a budget is a fraction of the best paid arm's cost
    assert replay.table.budget_arm() != 0 and replay.table.cost[:, replay.table.budget_arm()].sum() > 0


def test_the_kept_csqa_log_hands_every_free_signal_to_the_predicted_context() -> None:
    path = Path(__file__).parents[2] / "data" / "logs" / "csqa-local.jsonl"
    replay = read_replay(path, ["kgm:KGM", "smollm2-135m:LLM", "gemma3-270m:LLM"])
    assert replay.coverage["left_out"] == 0 and replay.table.n_questions == 180
    assert len(set(replay.table.texts)) == 180  # `eval pipeline --log` keys questions by text
    assert replay.free_arms == ["kgm"]
    # top probability, margin, entropy: all three, as the pipeline's predicted context reads them
    assert {len(s) for s in replay.free_signals["kgm"]} == {3}
    assert replay.free_signals["kgm"][0][0] == replay.free["kgm"][1][0]


def test_the_kept_ollama_obqa_log_reads_with_its_stated_arms_prices_and_accuracies() -> None:
    """`obqa-ollama-dev.jsonl` (tests/data/logs/README.md): OBQA dev's 500 questions, a free lexical arm
    and three priced LLM arms with the accuracies and per-answer prices its row states."""
    path = Path(__file__).parents[2] / "data" / "logs" / "obqa-ollama-dev.jsonl"
    replay = read_replay(path, ["openbook-overlap:KGM", "phi4:LLM", "qwen2.5-32b:LLM", "qwq-32b:LLM"])
    table = replay.table
    assert replay.coverage["left_out"] == 0 and table.n_questions == 500
    assert replay.free_arms == ["openbook-overlap"]
    assert table.correct.mean(axis=0).tolist() == pytest.approx([0.292, 0.902, 0.902, 0.896])
    assert [set(table.cost[:, j].tolist()) for j in range(4)] == [{0.0}, {0.30}, {0.80}, {0.80}]
    assert len(set(table.texts)) == 499  # dev question 927 repeats 7-806's text
