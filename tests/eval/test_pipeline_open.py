"""``kgwise.eval.pipeline_open``: open questions through the pipeline with UAG's sets attached, on a small
KG with test-double arms and generator (the real local model runs in the live evaluation)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.app.arms import ArmOutput
from kgwise.app.config import ArmConfig
from kgwise.errors import ConfigError
from kgwise.eval.pipeline_live import LiveMCConfig
from kgwise.eval.pipeline_open import evaluate_live_open, open_arms
from kgwise.grading import match_answer
from kgwise.kg.csr import CSRGraph
from kgwise.types import Question, Usage

pytestmark = pytest.mark.slow  # UAG's S1 scorer loads all-MiniLM-L6-v2

CAPITALS = [(f"Land{i:02d}", f"Town{i:02d}") for i in range(30)]


class FakeEncoder:
    """Test double of :class:`kgwise.embed.Encoder` for the router: a unit vector from the text's hash."""

    dim = 8

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).normal(size=8)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@dataclass
class FakeOpenArm:
    """Test double of a free-text arm: names the capital of the country in the question when ``knows``,
    else "no idea"; one call per answer; records what it answered."""

    config: ArmConfig
    knows: bool
    answered: list[str] = field(default_factory=list)

    def can_answer(self, question: Question) -> bool:
        return True

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=1)

    def answer(self, question: Question) -> ArmOutput:
        self.answered.append(question.text)
        assert not question.topic_entities  # the pipeline's door takes the text alone
        city = next((c for k, c in CAPITALS if k in question.text), "")
        return ArmOutput(city if self.knows else "no idea", usage=Usage(calls=1))


class FakeGenerator:
    """Test double of UAG's generator: answers the capital named in the prompt's paths, if any."""

    def generate(self, question_id: str, prompt: str) -> str:
        return next((c for _, c in CAPITALS if c in prompt), "unknown")


def _setup() -> tuple[CSRGraph, list[Question]]:
    kg = CSRGraph.from_triples([(k, "location.country.capital", c) for k, c in CAPITALS]
                               + [(k, "location.country.continent", "Earth") for k, _ in CAPITALS])
    qs = [Question(f"q{i}", f"what is the capital city of {k}?", gold=(c,), topic_entities=(k,))
          for i, (k, c) in enumerate(CAPITALS)]
    return kg, qs


def test_open_questions_are_answered_routed_graded_and_get_uag_sets(tmp_path: Path) -> None:
    kg, qs = _setup()
    arms = {"plain": FakeOpenArm(ArmConfig("plain", "llm", "LLM", spec="x", per_call=1.0), False),
            "kg": FakeOpenArm(ArmConfig("kg", "inject", "LLM", spec="x", per_call=1.0), True)}
    cfg = LiveMCConfig(fit_n=20, test_n=10, alphas=(0.5,), budget=1.0, delta=0.1)
    report = evaluate_live_open(qs[:20], qs[20:], arms, FakeEncoder(), kg, FakeGenerator(), "fake", cfg,
                                tmp_path, {"kg": "capitals"})
    assert report["arms"]["kg"]["accuracy"] == 1.0 and report["arms"]["plain"]["accuracy"] == 0.0
    p = report["pipeline"]
    assert p["spent"] <= p["budget"] + 1e-9 and p["answered"] + p["unanswered"] == 10
    rows = report["questions"]
    assert [r["id"] for r in rows] == [q.id for q in qs[20:]]
    for r in rows:
        if r["answer"] is not None:
            assert r["correct"] == match_answer(r["answer"], r["gold"])
    s = report["sets"]["0.5"]
    assert s["overall"]["n"] == 10 and s["overall"]["coverage"] == pytest.approx(
        np.mean([any(match_answer(a, r["gold"]) for a in r["sets"]["0.5"]) for r in rows]))
    assert s["calibration"]["certified"] and report["uag"]["gold_reachable_test"] == 1.0
    assert s["calibration"]["delta"] == 0.1 and s["note"].startswith("certified at α=0.5, δ=0.1")
    # the pipeline's own sets: calibrated by its fit on its own grounding of the text, one per answer
    own = report["pipeline_sets"]
    assert own["calibration"]["reason"] == "" and own["calibration"]["grounded"] == 20
    assert own["overall"]["n"] + own["answers_without_set"] == p["answered"] and own["overall"]["n"] > 0
    carried = [r for r in rows if r["pipeline_set"] is not None]
    assert own["overall"]["coverage"] == pytest.approx(
        np.mean([any(match_answer(a, r["gold"]) for a in r["pipeline_set"]) for r in carried]))


def test_open_arms_and_bad_questions(tmp_path: Path) -> None:
    assert [a.name for a in open_arms("m")] == ["m", "m+kg"] and [a.name for a in open_arms("m", plain=False)
                                                                  ] == ["m+kg"]
    kg, qs = _setup()
    arm = {"kg": FakeOpenArm(ArmConfig("kg", "inject", "LLM", spec="x", per_call=1.0), True)}
    with pytest.raises(ConfigError, match="calibration questions"):
        evaluate_live_open(qs[:4], qs[4:6], arm, FakeEncoder(), kg, FakeGenerator(), "fake",
                           LiveMCConfig(fit_n=4, test_n=2, alphas=(0.1,)), tmp_path, {})
    with pytest.raises(ConfigError, match="topic entities"):
        evaluate_live_open([Question("a", "x?", gold=("y",))] * 10, qs[:2], arm, FakeEncoder(), kg,
                           FakeGenerator(), "fake", LiveMCConfig(fit_n=10, test_n=2, alphas=(0.5,)), tmp_path,
                           {})
