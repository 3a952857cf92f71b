"""Abstention through the pipeline, per routed arm, over random splits (``pytest -m guarantee``).

The synthetic multiple-choice questions and arms of ``test_pipeline_sets`` (two kinds of question, a free
KG-model-like arm sure on one kind, a cheap and a dear LLM-like arm; i.i.d., so a dev log and later
questions are exchangeable). Per split a fresh pipeline with ``[answer_sets] abstain = true`` at α = 0.2 is
fitted on 300 questions (150 held out) and answers 2,000 fresh ones, each settled by feedback while the
router keeps learning. Per arm with ≥ 50 answered test questions, the accuracy among them (the pipeline's
live count, ``status().abstention``) may fall below 1 − α beyond noise in no more splits than a method
that keeps the PAC promise (δ = 0.05) reaches except with probability 0.001 (:mod:`tests.guarantees.bounds`;
the share of splits at ≥ 1 − α is printed), and the pipeline must answer a real share of the questions.
Seeded throughout (decision ids included; ``KGWISE_GUARANTEE_SEED`` draws other splits).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.config import AnswerSetConfig
from kgwise.app.fit import fit_questions
from kgwise.app.pipeline import Pipeline

from .bounds import allowed_flags, below_beyond_noise
from .test_pipeline_sets import (
    BOOST,
    PRICE,
    SEED,
    FakeEncoder,
    _questions,
    fit_module,
    seed_ids,
    synthetic_pipeline,
)

pytestmark = pytest.mark.guarantee

ALPHA = 0.2
SPLITS = int(os.environ.get("KGWISE_GUARANTEE_SPLITS", "30"))
FIT, TEST = 300, 2000


def _split(split: int, root: Path, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[dict[str, tuple[int, int]], float]:
    """Per arm with ≥ 50 answered: (answered, right among them), the pipeline's live counts; and the share
    answered overall."""
    split = SEED * 1000 + split
    seed_ids(monkeypatch, split)
    rng = np.random.default_rng(5000 + split)
    fit_q, test_q = _questions(split, "fit", FIT, rng), _questions(split, "test", TEST, rng)
    sets = AnswerSetConfig(alpha=ALPHA, delta=0.05, abstain=True)
    arms, config = synthetic_pipeline(split, root, sets, PRICE, TEST)
    answered = 0
    with Pipeline(config, root / f"state-{split}", arms, FakeEncoder()) as pipe:
        fit_questions(pipe, fit_q, max_spend=1e9, echo=lambda _: None)
        for q in test_q:
            r = pipe.answer(q.text, list(q.choice_texts))
            answered += not r.abstained
            pipe.feedback(r.decision, gold=q.gold[0])
        live = pipe.status().abstention
    out = {n: (s.answered, s.correct) for n, s in live.items() if s.answered >= 50}
    assert sum(s.answered for s in live.values()) == answered
    return out, answered / TEST


def test_accuracy_among_answered_holds_per_arm_within_the_binomial_allowance(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fit_module, "MIN_CROSS_FIT", 10**9)
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    per_arm: dict[str, list[float]] = {n: [] for n in BOOST}
    flagged: dict[str, int] = {n: 0 for n in BOOST}
    shares = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        for s in range(SPLITS):
            rows, share = _split(s, Path(tmp), monkeypatch)
            shares.append(share)
            for name, (n, right) in rows.items():
                per_arm[name].append(right / n)
                flagged[name] += below_beyond_noise(right, n, ALPHA)
    print(f"answered {np.mean(shares):.3f} of the questions on average (min {min(shares):.3f})")
    for name, accs in per_arm.items():
        if accs:
            print(f"{name}: {len(accs)} splits with ≥ 50 answered; accuracy among answered ≥ {1 - ALPHA:g} "
                  f"on {np.mean(np.asarray(accs) >= 1 - ALPHA):.3f}, mean {np.mean(accs):.3f}, "
                  f"min {min(accs):.3f}; below beyond noise in {flagged[name]} (allowed "
                  f"{allowed_flags(len(accs), 0.05)})")
    assert sum(len(a) >= SPLITS // 2 for a in per_arm.values()) >= 1  # not vacuous
    for name, accs in per_arm.items():
        if len(accs) >= 10:
            assert flagged[name] <= allowed_flags(len(accs), 0.05), name
    assert np.mean(shares) >= 0.3
