"""``kgwise init / status / feedback / ask --config`` from the shell: bad input ends in one error line
naming file, line and key, exit code 2, before any model loads."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kgwise.cli.common import console
from kgwise.cli.main import app
from kgwise.cli.pipeline import (
    SET_SHOWN,
    SUPPORT_SHOWN,
    parse_arm,
    print_answer,
    print_feedback,
    print_fit,
    print_status,
)

runner = CliRunner()


def said(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def _kg(tmp_path: Path) -> Path:
    path = tmp_path / "kg.tsv"
    path.write_text("aspirin\ttreats\theadache\ninsulin\ttreats\tdiabetes\n", encoding="utf-8")
    return path


def test_arm_options_parse_with_and_without_a_price() -> None:
    assert parse_arm("big=llm:openai:gpt-4o-mini") == ("big", "llm", "openai:gpt-4o-mini", None)
    assert parse_arm("mine=llm:openai:smollm2:0.002") == ("mine", "llm", "openai:smollm2", 0.002)
    assert parse_arm("k=kgm:model.pt:0") == ("k", "kgm", "model.pt", 0.0)


def test_init_writes_a_config_that_status_reads(tmp_path: Path) -> None:
    kg = _kg(tmp_path)
    out = tmp_path / "kgwise.toml"
    code, text = said(["init", "--kg", str(kg), "--arm", "small=llm:smollm2-135m:0.001",
                       "--arm", "small-kg=inject:smollm2-135m:0.003", "--budget-usd", "2", "--out", str(out)])
    assert code == 0, text
    code, text = said(["init", "--kg", str(kg), "--arm", "a=llm:smollm2-135m", "--out", str(out)])
    assert code == 2 and "exists; pass --force" in text
    code, text = said(["status", "--config", str(out)])
    assert code == 0, text
    assert "budget 2 usd: spent 0 (0.0%)" in text and "0 waiting for feedback" in text and "small-kg" in text
    assert (tmp_path / ".kgwise-state" / "state.json").is_file()
    code, text = said(["status", "--config", str(out), "--json", str(tmp_path / "status.json")])
    assert code == 0, text
    body = json.loads((tmp_path / "status.json").read_text())
    assert body["budget"] == 2.0 and body["pending"] == 0 and [a["name"] for a in body["arms"]] == [
        "small", "small-kg"]


def test_status_shows_what_each_arm_s_sets_rest_on_and_drift() -> None:
    from kgwise.app.pipeline import ArmStatus, CoverageStatus, PipelineStatus, RoutedCalibration

    def arm(name: str, coverage: CoverageStatus, routed: RoutedCalibration | None) -> ArmStatus:
        return ArmStatus(name, "llm", "llm", 40, 0.04, 75, coverage, routed)

    fine = CoverageStatus(30, 28, 0, 28 / 30, 0.80, 0.99, 0.9, False)
    drifting = CoverageStatus(30, 12, 0, 0.4, 0.26, 0.56, 0.9, True)
    st = PipelineStatus("kgwise.toml", ".kgwise-state", "usd", 1.0, 0.08, 0.0, 0.92, 0.0, 80, 3, 0.1, 0.05,
                        True, (arm("cheap", fine, RoutedCalibration(51, 20, True)),
                               arm("dear", drifting, RoutedCalibration(24, 4, False))), pinned=None)
    text = " ".join(_printed(print_status, st).replace("│", " ").split())
    assert "spent 0.08 (8.0%)" in text and "80 questions answered, 3 waiting for feedback" in text
    assert "51 held-out; 20 open, certified" in text and "24 held-out; 4 open, not certified" in text
    assert "93.3% of 30 (80.0%–99.0%; target 90%)" in text and "drift" not in text.split("dear")[0]
    assert "40.0% of 30 (26.0%–56.0%; target 90%) drift" in text


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    _kg(tmp_path)
    cfg = tmp_path / "kgwise.toml"
    cfg.write_text('[kg]\ngraph = "kg.tsv"\n[[arms]]\nname = "a"\nkind = "gpt"\nspec = "smollm2-135m"\n'
                   '[router]\nbudget_usd = 1\n', encoding="utf-8")
    code, text = said(["status", "--config", str(cfg)])
    assert code == 2 and f"{cfg}:5: arms[0].kind: unknown arm kind 'gpt'" in text
    cfg.write_text(cfg.read_text().replace('"gpt"', '"llm"').replace("budget_usd = 1", "budget_usd = 0"))
    code, text = said(["ask", "What treats diabetes?", "--config", str(cfg)])
    assert code == 2 and f"{cfg}:8: router.budget_usd: the budget must be > 0" in text
    cfg.write_text(cfg.read_text().replace("budget_usd = 0", "budget_usd = 1"))
    code, text = said(["feedback", "abc", "--config", str(cfg)])
    assert code == 2 and "give one of --correct, --wrong or --gold X" in text
    code, text = said(["feedback", "abc", "--wrong", "--config", str(cfg)])
    assert code == 2 and "unknown decision 'abc' (not made with this state" in text
    code, text = said(["init", "--kg", "kg.tsv", "--arm", "a=llm", "--out", str(tmp_path / "x.toml")])
    assert code == 2 and "expected NAME=KIND:SPEC[:PRICE]" in text
    code, text = said(["ask", "2 + 2?", "--state", str(tmp_path)])
    assert code == 2 and "--state goes with --config" in text


def _printed(show: Any, value: object) -> str:
    width, console.width = console.width, 400  # one line per row
    try:
        with console.capture() as captured:
            show(value)
    finally:
        console.width = width
    return captured.get()


def test_an_open_answer_s_large_set_is_shown_by_its_first_members() -> None:
    from kgwise.app.arms import Knowledge
    from kgwise.app.pipeline import AnswerSetResult, PipelineResult
    from kgwise.types import Usage

    names = tuple(f"entity {i}" for i in range(300))
    why = "UAG's largest set, every candidate its retrieval keeps (...), without guarantee: the 4 of 90 …"
    result = PipelineResult("d1", "Who wrote it?", "entity 7", None, {}, ("entity 7",), ("book",), "small",
                            (), Knowledge(), AnswerSetResult(names, names, 0.1, False, why, 4),
                            Usage(calls=1), 0.001, "usd", 0.999)
    text = _printed(print_answer, result)
    assert "set of 300 (α = 0.1, guarantee does NOT hold): entity 0, " in text
    assert f"entity {SET_SHOWN - 1} … and {300 - SET_SHOWN} more (all with --json)" in text
    assert f"entity {SET_SHOWN}," not in text and why in text and "kgwise feedback d1" in text


def test_an_answer_prints_a_few_of_its_supporting_paths() -> None:
    from kgwise.app.arms import Knowledge
    from kgwise.app.pipeline import PipelineResult
    from kgwise.types import Triple, Usage

    support = tuple((Triple("hypertension", "may be treated by", f"drug {i}"),) for i in range(5))
    knowledge = Knowledge((), support, "(hypertension, may be treated by, drug 0)", "P_sub+F_t", support)
    result = PipelineResult("d1", "Which drug?", "drug 0", "A", {"A": 1.0}, (), ("hypertension",), "kg",
                            (), knowledge, None, Usage(calls=1), 0.0, "calls", 9.0)
    text = _printed(print_answer, result)
    assert "support (5 KG path(s) to the answer):" in text
    assert "  hypertension -[may be treated by]- drug 0" in text
    assert f"drug {SUPPORT_SHOWN - 1}" in text and f"drug {SUPPORT_SHOWN}\n" not in text
    assert f"… and {5 - SUPPORT_SHOWN} more (all with --json)" in text
    assert "support" not in _printed(print_answer, replace(result, knowledge=replace(knowledge, support=())))


def test_fit_prints_a_row_per_arm_the_replay_and_what_was_not_fitted() -> None:
    from kgwise.app.fit import ArmFit, FitReport, RouterSelection

    arms = (ArmFit("gnn", 12, 0.5, 0.0, 0.0, 0.75, 4, 0.41, 0.95, 1.5),
            ArmFit("big", 12, 0.75, 0.024, 0.002, 0.25, 2, None, None, None))
    report = FitReport(12, "usd", 0.024, 0.024, 12, 12, 1.0, 0.583, 0.006, arms, {},
                       "per arm: P(truth ∈ set)", ("router settings are the config's: 6 questions",),
                       RouterSelection("config", "6 questions", "question", None, False, pinned="gnn"))
    text = " ".join(_printed(print_fit, report).replace("│", " ").split())
    assert "gnn (pinned) 12 0.500 0 75% 4 held-out 0.410 95.0% 1.50" in text
    assert "big 12 0.750 0.002 25% 2 held-out — — —" in text
    assert "accuracy 0.583, spend 0.006 of 1 usd; this fit paid 0.024 (12 calls, 12 resumed)" in text
    assert "not fitted: router settings are the config's" in text and "per arm: P(truth ∈ set)" in text


def test_feedback_prints_what_the_router_learnt() -> None:
    from kgwise.app.pipeline import FeedbackResult

    text = " ".join(_printed(print_feedback, FeedbackResult("d1", "big", 1.0, False, {"gnn": 0.0}, 0.2, 0.8,
                                                            "cost 0.3 was above its bound 0.2")).split())
    assert "decision d1: arm big right; its set missed the truth; spent 0.2, remaining 0.8" in text
    assert "observed arms: gnn wrong" in text and "warning: cost 0.3 was above its bound 0.2" in text


def test_init_checks_what_it_writes_and_writes_nothing_wrong(tmp_path: Path) -> None:
    kg = _kg(tmp_path)
    out = tmp_path / "kgwise.toml"
    for args, fault in [
        (["--kg", str(kg), "--arm", "a=llm:smollm3"], "arms[0].spec: unknown LLM 'smollm3'"),
        (["--kg", str(tmp_path / "no.tsv"), "--arm", "a=llm:smollm2-135m"], "kg.graph: graph file"),
        (["--kg", str(kg), "--arm", "a=llm:smollm2-135m", "--alpha", "1"],
         "answer_sets.alpha: must lie in (0, 1)"),
    ]:
        code, text = said(["init", *args, "--budget-calls", "5", "--out", str(out)])
        assert code == 2 and "not written:" in text and fault in text and f"{out}:" in text, text
        assert not out.exists() and list(tmp_path.glob("kgwise.toml*")) == []
    code, text = said(["init", "--kg", str(kg), "--arm", "a=llm:smollm2-135m", "--budget-calls", "5",
                       "--out", str(out)])
    assert code == 0 and f"Next: `kgwise fit --config {out} --questions dev.jsonl`" in text


@pytest.mark.slow  # SmolLM2-135M answers three questions in a subprocess
def test_ask_a_file_of_questions_quietly_and_resumably(tmp_path: Path) -> None:
    import subprocess
    import sys

    kg = _kg(tmp_path)
    cfg = tmp_path / "kgwise.toml"
    assert said(["init", "--kg", str(kg), "--arm", "small=llm:smollm2-135m", "--arm",
                 "small-kg=inject:smollm2-135m", "--budget-calls", "50", "--out", str(cfg)])[0] == 0
    texts = ["What treats headache?", "What treats diabetes?", "Which drug helps pain?"]
    rows = [{"id": f"q{i}", "text": t, "choices": ["aspirin", "insulin"]} for i, t in enumerate(texts)]
    qs = tmp_path / "q.jsonl"
    qs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out, report = tmp_path / "answers.jsonl", tmp_path / "report.json"
    cmd = [sys.executable, "-m", "kgwise", "ask", "--questions", str(qs), "--out", str(out),
           "--config", str(cfg), "--json", str(report)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = done.stdout + done.stderr  # piped: nothing from llama.cpp, transformers or progress bars
    assert "3 answered now, 0 already in" in printed and "0 refused, of 3" in printed
    assert not any(s in printed for s in ("Loading weights", "it/s", "llama_", "ggml", "Warning")), printed
    answers = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [a["id"] for a in answers] == ["q0", "q1", "q2"]
    assert all(a["answer"] in {"aspirin", "insulin"} and a["decision"] and a["arm"] for a in answers)
    assert json.loads(report.read_text())["answered"] == 3
    again = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 answered now, 3 already in" in again.stdout
