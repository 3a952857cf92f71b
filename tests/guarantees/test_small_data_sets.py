"""A newcomer's dev log (50 labelled multiple-choice questions, 4 arms) over 50 random splits
(``pytest -m guarantee``): the pipeline's sets at α = 0.2 with ``guarantee = "pac"`` (δ = 0.05), today's
rule and the small-data one measured in the same run.

Synthetic i.i.d. questions of two kinds and four arms (a free KG-model-like arm sure on kind 0, three
LLM-like arms of rising skill and price; ``test_pipeline_sets``' generator). Per split a fresh pipeline is
fitted on 50 questions (25 held out, re-selected by the router at each answer) and answers 1,000 fresh
ones with feedback. An arm whose routed held-out questions are too few (PAC at α = 0.2 needs 14) gets its
set from all 50 graded dev questions it answered — PAC over questions like the dev log, not conditional
on the router's choice (first the 25 held-out ones alone; before that, every choice, 4 of 4). Asserted:
mean set size ≤ 2 with the fallback, and per arm with ≥ 50 routed test questions coverage ≥ 0.8 on
≥ 90 % of the splits; the mean size with every choice where the fallback applies is printed beside it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.config import AnswerSetConfig
from kgwise.app.fit import fit_questions
from kgwise.app.pipeline import Pipeline

from . import test_pipeline_sets as base

pytestmark = pytest.mark.guarantee

ALPHA = 0.2
SPLITS = 50
FIT, TEST = 50, 1000
ARMS = {"kgm": ((6.0, 0.3), 0.0), "small": ((1.5, 1.5), 0.001), "medium": ((2.5, 2.0), 0.003),
        "large": ((4.0, 3.0), 0.01)}


def _split(split: int, root: Path) -> tuple[list[tuple[int, bool]], dict[str, float]]:
    """Per answer (set size, fell back); per arm with ≥ 50 routed its coverage."""
    rng = np.random.default_rng(9000 + split)
    fit_q, test_q = base._questions(split, "fit", FIT, rng), base._questions(split, "test", TEST, rng)
    sets = AnswerSetConfig(alpha=ALPHA, delta=0.05, guarantee="pac")
    arms, config = base.synthetic_pipeline(split, root, sets, {n: p for n, (_, p) in ARMS.items()}, TEST)
    sizes: list[tuple[int, bool]] = []
    covered: dict[str, list[bool]] = {n: [] for n in arms}
    with Pipeline(config, root / f"state-{split}", arms, base.FakeEncoder()) as pipe:
        fit_questions(pipe, fit_q, max_spend=1e9, echo=lambda _: None)
        for q in test_q:
            r = pipe.answer(q.text, list(q.choice_texts))
            s = r.answer_set
            assert s is not None
            sizes.append((len(s.labels), "not conditional on the router's choice" in s.statement))
            covered[r.arm].append(q.gold[0] in s.labels)
            pipe.feedback(r.decision, gold=q.gold[0])
    return sizes, {n: float(np.mean(c)) for n, c in covered.items() if len(c) >= 50}


def test_a_newcomers_log_gets_small_sets_that_cover(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BOOST", {n: b for n, (b, _) in ARMS.items()})  # SyntheticArm reads it
    monkeypatch.setattr(base.fit_module, "MIN_CROSS_FIT", 10**9)
    tmpdir = "/dev/shm" if Path("/dev/shm").is_dir() else None
    new: list[float] = []
    today: list[float] = []
    fell_back: list[float] = []
    per_arm: dict[str, list[float]] = {n: [] for n in ARMS}
    with tempfile.TemporaryDirectory(dir=tmpdir) as tmp:
        for s in range(SPLITS):
            sizes, cov = _split(s, Path(tmp))
            new.append(float(np.mean([k for k, _ in sizes])))
            today.append(float(np.mean([4 if back else k for k, back in sizes])))
            fell_back.append(float(np.mean([back for _, back in sizes])))
            for name, c in cov.items():
                per_arm[name].append(c)
    print(f"{FIT} dev questions, α = {ALPHA}: mean set size {np.mean(new):.2f} of 4 (every choice where it "
          f"falls back: {np.mean(today):.2f}); answers whose arm borrowed all its dev questions "
          f"{np.mean(fell_back):.3f}")
    for name, accs in per_arm.items():
        if accs:
            print(f"{name}: {len(accs)} splits with ≥ 50 routed; coverage ≥ {1 - ALPHA:g} on "
                  f"{np.mean(np.asarray(accs) >= 1 - ALPHA):.3f}, mean {np.mean(accs):.3f}, "
                  f"min {min(accs):.3f}")
    assert np.mean(new) <= 2.0
    assert np.mean(fell_back) > 0  # the regime this test is about
    for name, accs in per_arm.items():
        if len(accs) >= 10:
            assert np.mean(np.asarray(accs) >= 1 - ALPHA) >= 0.90, name
