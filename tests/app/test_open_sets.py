"""kgwise.app.open_sets: UAG's sets on the pipeline's open answers, calibrated by ``fit``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.fit import fit, held_out
from kgwise.app.pipeline import Pipeline, RoutedCalibration
from kgwise.app.state import CoverageCount
from kgwise.datasets.user import read_questions
from kgwise.errors import DataError
from kgwise.types import Question

from .conftest import TREATS, TRIPLES, dev_rows, write_config, write_kg, write_questions

OPEN_CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "local"
kind = "llm"
spec = "smollm2-135m"
price = 0.001
max_tokens = 8

[router]
budget_usd = 1.0

[answer_sets]
alpha = 0.3
delta = 0.2
uag_llm = "smollm2-135m"
"""


def open_rows() -> list[dict[str, object]]:
    """Open questions about the six drugs (two phrasings each) with the KG's diseases as gold names."""
    rows: list[dict[str, object]] = []
    for form in ("What does {} treat?", "Which illness is {} given for?"):
        for drug, cured in TREATS.items():
            rows.append({"id": f"o{len(rows)}", "text": form.format(drug), "gold": cured})
    return rows


def test_uag_llm_must_be_a_local_model(tmp_path: Path) -> None:
    from kgwise.app.config import PipelineConfig

    write_kg(tmp_path)
    body = OPEN_CONFIG.replace('uag_llm = "smollm2-135m"', 'uag_llm = "openai:gpt-4o"')
    with pytest.raises(DataError, match=r":17: answer_sets.uag_llm: must be a local model"):
        PipelineConfig.load(write_config(tmp_path, body))


def test_without_enough_open_questions_the_fit_says_why_and_answers_say_so(tmp_path: Path) -> None:
    """Test doubles for the arms (``StubArm``); the KG, its grounding and the open-set step are real."""
    from kgwise.app.config import PipelineConfig
    from kgwise.kg.loaders import open_graph_file

    from .conftest import STUB_CONFIG, FakeEncoder, StubArm

    write_kg(tmp_path)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=100.0, seed=0)
    cfg = PipelineConfig.load(write_config(tmp_path, body + 'uag_llm = "smollm2-135m"\n'))
    runners = {n: StubArm(cfg.arm(n)) for n in cfg.names}
    kg = open_graph_file(tmp_path / "kg.tsv")
    with Pipeline(cfg, tmp_path / "state", runners, FakeEncoder(), kg) as pipe:
        report = fit(pipe, write_questions(tmp_path, dev_rows(2)), max_spend=100.0, echo=lambda _: None)
        assert report.open_sets is not None and report.open_sets.questions == 0
        assert "0 graded open dev questions with a grounded topic entity" in report.not_fitted[-1]
        r = pipe.answer("What does aspirin treat?")
        why = ("the last `kgwise fit` calibrated none: 0 graded open dev questions with a grounded topic "
               "entity")
        assert r.answer_set is None and why in r.notes[0] and "more held out" in r.notes[0]
        assert "run `kgwise fit`" not in r.notes[0]  # the fit ran: the reason, not the instruction
        assert str(pipe.status().open_sets).startswith(why)


@pytest.mark.slow
def test_fit_calibrates_uag_and_open_answers_carry_its_set(tmp_path: Path) -> None:
    """Real parts: smollm2 answers and writes Φ(P); the drug KG; UAG certified on the held-out open dev
    questions, and again on those the router sends to the answering arm."""
    write_kg(tmp_path)
    config = write_config(tmp_path, OPEN_CONFIG)
    dev = write_questions(tmp_path, open_rows())
    with Pipeline.from_config(config) as pipe:
        report = fit(pipe, dev, max_spend=1.0, echo=lambda _: None)
        o = report.open_sets
        held = sum(held_out(read_questions(dev), 0.5, 0.6))  # 1 − uag_tune_share of the open questions
        assert o is not None and o.reason == "" and (o.questions, o.grounded, o.calibration) == (12, 12, held)
        assert held == 7 and o.summary["certified"] and o.summary["calibration"] == held
        assert report.settings["held_out"] == held  # out of the router's learning too
        (arm,) = o.per_arm
        assert arm.arm == "local" and arm.questions == held and arm.lambda_ is not None
        assert json.loads((pipe.state.root / "fit-report.json").read_text())["open_sets"]["grounded"] == 12
        r = pipe.answer("What does metformin treat?")
        s = r.answer_set
        assert s is not None and s.guarantee and "P(miss rate ≤ 0.3) ≥ 0.8" in s.statement
        assert f"sends to arm 'local' (Learn-then-Test on the {held} of {held} held-out" in s.statement
        assert s.calibration_size == held
        labels = {x for h, _, t in TRIPLES for x in (h, t)}
        assert "metformin" in s.statement and s.texts and set(s.texts) <= labels
        fb = pipe.feedback(r.decision, gold=["diabetes"])
        assert fb.covered == ("diabetes" in s.texts)
        assert pipe.status().arms[0].coverage.n == 1
        forced = pipe.answer("What does metformin treat?", arm="local").answer_set
        assert forced is not None and forced.guarantee and forced.statement.endswith("over all of them")
        topics = ("metformin",)
        q = Question("q", "What does metformin treat?")
        none_sent, _ = pipe.open_set("local", q, topics, np.full(held, -1, dtype=np.int64))
        assert none_sent is not None and not none_sent.guarantee
        assert f"the 0 of {held} held-out open dev questions" in none_sent.statement
        assert "certify no λ at α = 0.3, δ = 0.2" in none_sent.statement
        assert none_sent.statement.startswith("UAG's largest set")  # open_uncertified's default
        assert set(s.texts) <= set(none_sent.texts), "the largest set holds every calibrated set"
        sets = pipe.config.answer_sets
        pipe.config = replace(pipe.config, answer_sets=replace(sets, open_uncertified="pooled"))
        pooled, _ = pipe.open_set("local", q, topics, np.full(held, -1, dtype=np.int64))
        assert pooled is not None and not pooled.guarantee and set(pooled.texts) == set(forced.texts)
        assert "over all of them, not over those routed to arm 'local' alone" in pooled.statement
        pipe.config = replace(pipe.config, answer_sets=sets)
        assert pipe.state.calibration is not None
        pipe.state.calibration.meta["fit"] = "another fit"
        other, _ = pipe.open_set("local", q, topics, np.zeros(held, dtype=np.int64))
        assert other is not None and not other.guarantee and not other.certified
        assert "not the one UAG's was made with" in other.statement
        loose = pipe.answer("What does metformin treat?")  # its set promises nothing: not counted as coverage
        assert loose.answer_set is not None and not loose.answer_set.certified
        pipe.feedback(loose.decision, gold=["diabetes"])
        count = pipe.state.coverage["local"]
        assert (count.n, count.uncertified) == (1, 1) and pipe.status().arms[0].coverage.uncertified == 1
        pipe.state.calibration.meta["fit"] = pipe.open_sets.fit if pipe.open_sets else None
        pipe.state.coverage["local"] = CoverageCount(n=30, covered=12)  # live coverage .4 against .7
        drifted = pipe.answer("What does metformin treat?").answer_set
        assert drifted is not None and not drifted.guarantee and "drift" in drifted.statement
        pipe.state.coverage["local"] = CoverageCount()
    with Pipeline.from_config(config) as again:  # the calibration is kept in the state
        assert again.open_sets is not None and again.open_sets.size == o.summary["calibration"]
        s2 = again.answer("What does aspirin treat?").answer_set
        assert s2 is not None and s2.guarantee and "sends to arm 'local'" in s2.statement
    with Pipeline.from_config(config, models=False) as light:
        status = light.status()
        assert str(status.open_sets).startswith("certified at α=0.3, δ=0.2")
        assert status.arms[0].routed == RoutedCalibration(0, held, True)  # no multiple-choice dev questions
