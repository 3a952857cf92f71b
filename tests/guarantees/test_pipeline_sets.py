"""The pipeline's per-arm (Mondrian) answer sets over 50 random splits (run with ``pytest -m guarantee``).

Synthetic multiple-choice questions of two kinds, i.i.d. (so a dev log and later questions are
exchangeable); three arms whose choice probabilities depend on the kind: a free KG-model-like arm (sure
and mostly right on kind 0, unsure on kind 1), a cheap and a dear LLM-like arm. Per split a fresh
pipeline (``question+free`` context, a budget of 60 % of always calling the dear arm) is fitted with
:func:`kgwise.app.fit.fit_questions` on 300 questions (150 teach the router, 150 are held out and
re-selected by the router as it stands at each answer, :mod:`kgwise.app.calibration`), then answers 2,000
fresh questions, each settled by feedback, while its router keeps learning.

Per split and arm the coverage of the live sets is counted over the test questions the live router sent
to it, by the pipeline's own live counts (``status()``), checked against the sets it attached. (The
router reads the free arm's confidence, so the questions it sends to an arm depend on that arm's scores:
no per-kind population figure applies; 2,000 test questions per split keep the count's noise — a
finite-sample error the PAC statement about the population does not cover — to about ±0.01.)
Seeded throughout (the questions, the router, the decision ids whose hash draws the held-out questions'
re-routing; ``KGWISE_GUARANTEE_SEED`` picks other splits), so a run repeats exactly.
The fit's cross-fitting of the router settings is skipped (``MIN_CROSS_FIT`` raised) to keep 100 fits
within minutes; it changes which questions go where, not the calibration.

* ``guarantee = "pac"`` (training-conditional, δ = 0.05): per arm, its coverage is below 1 − α beyond
  noise in no more splits than a valid method reaches except with probability 0.001
  (:mod:`tests.guarantees.bounds`: 9 of 50) — asserted; the share of splits whose coverage is ≥ 1 − α is
  printed (a valid method at δ = 0.05 is below 1 − α in up to 5 % of splits *before* the test sample's
  noise, so "≥ 95 % of the splits", asserted before, fails a valid method often).
* ``guarantee = "pac_all_arms"`` (δ = 0.05 split over the three arms): splits where some arm is below
  1 − α beyond noise, within the same allowance (each arm's test at γ/3) — asserted.
* ``guarantee = "marginal"`` (split conformal): the mean coverage over splits ≥ 1 − α minus three standard
  errors — asserted; its share of splits ≥ 1 − α is printed (marginal sets promise no share).
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import random
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.app.arms import ArmOutput, Knowledge
from kgwise.app.config import (
    PACED_COKE,
    AnswerSetConfig,
    ArmConfig,
    Guarantee,
    KGConfig,
    PipelineConfig,
    RouterConfig,
)
from kgwise.app.fit import fit_questions
from kgwise.app.pipeline import Pipeline
from kgwise.route.coke import CokeConfig
from kgwise.types import Question, Usage, make_question

from .bounds import GAMMA, allowed_flags, below_beyond_noise

pytestmark = pytest.mark.guarantee
fit_module = importlib.import_module("kgwise.app.fit")  # the module (kgwise.app.fit is also the function)

ALPHA = 0.1
SPLITS = int(os.environ.get("KGWISE_GUARANTEE_SPLITS", "50"))
FIT, TEST = 300, 2000
SEED = int(os.environ.get("KGWISE_GUARANTEE_SEED", "0"))
CHOICES = 4
# per arm and kind: the Dirichlet boost of the truth's probability (larger: surer and more often right)
BOOST = {"kgm": (6.0, 0.3), "small": (1.5, 1.5), "large": (4.0, 3.0)}
PRICE = {"kgm": 0.0, "small": 0.001, "large": 0.01}


def seed_ids(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Make ``uuid.uuid4`` — the pipeline's decision ids (whose hash draws the held-out questions'
    re-routing) and the fit's id (whose hash draws ``calibrate_on = "arm"``'s coins) — a sequence seeded by
    ``seed``, so that a split repeats exactly."""
    gen = random.Random(seed)
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=gen.getrandbits(128), version=4))


def _probs(arm: str, kind: int, rng: np.random.Generator, size: int) -> npt.NDArray[np.float64]:
    """``size`` probability rows (truth first) of ``arm`` on questions of ``kind``."""
    conc = np.ones((size, CHOICES))
    conc[:, 0] += BOOST[arm][kind]
    return np.asarray(rng.dirichlet(conc[0], size=size) if size else np.zeros((0, CHOICES)))


def _kind(text: str) -> int:
    return int(text.split("kind ")[1][0])


@dataclass
class SyntheticArm:
    """An arm drawing its probabilities from :func:`_probs`, seeded by the arm and the question text; the
    truth is choice ``A`` (the texts are shuffled so that the label says nothing)."""

    config: ArmConfig

    def can_answer(self, question: Question) -> bool:
        return bool(question.choices)

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=1)

    def answer(self, question: Question) -> ArmOutput:
        digest = hashlib.blake2b((self.config.name + "\0" + question.text).encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        p = _probs(self.config.name, _kind(question.text), rng, 1)[0]
        truth = [c.text for c in question.choices].index("right")
        order = [truth] + [i for i in range(CHOICES) if i != truth]
        probs = np.empty(CHOICES)
        probs[order] = p
        labels = [c.label for c in question.choices]
        return ArmOutput(labels[int(np.argmax(probs))], dict(zip(labels, probs.tolist(), strict=True)),
                         Knowledge(), Usage(calls=1), signals=(float(probs.max()),))


class FakeEncoder:
    """Test double of :class:`kgwise.embed.Encoder`: the question's kind and a hash, as a 4-d vector."""

    dim = 4

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for t in texts:
            h = hashlib.blake2b(t.encode(), digest_size=4).digest()
            out.append([1.0, float(_kind(t)), h[0] / 255, h[1] / 255])
        return np.asarray(out, dtype=np.float32)


def _questions(split: int, part: str, n: int, rng: np.random.Generator) -> list[Question]:
    out = []
    for i in range(n):
        kind = int(rng.random() < 0.5)
        texts = ["right", "wrong one", "wrong two", "wrong three"]
        rng.shuffle(texts)
        out.append(make_question(f"split {split} {part} question {i} of kind {kind}?", texts,
                                 qid=f"{part}{i}", answer="right"))
    return out


def synthetic_pipeline(split: int, root: Path, sets: AnswerSetConfig, prices: dict[str, float], test: int
                       ) -> tuple[dict[str, SyntheticArm], PipelineConfig]:
    """The arms ``prices`` names (``kgm``: the free, observed KG-model-like arm; the others LLM-like) and a
    pipeline config with a ``question+free`` context and a budget of 60 % of always calling ``large`` on
    ``test`` questions."""
    arms = {n: SyntheticArm(ArmConfig(name=n, kind="kgm" if n == "kgm" else "llm",
                                      cluster="KGM" if n == "kgm" else "LLM", spec=None if n == "kgm" else n,
                                      per_call=price, observe=n == "kgm"))
            for n, price in prices.items()}
    config = PipelineConfig(root / "kgwise.toml", KGConfig(), tuple(a.config for a in arms.values()),
                            RouterConfig(0.6 * prices["large"] * test, "usd", test, split, True,
                                         CokeConfig(**PACED_COKE), "question+free"), sets)
    return arms, config


def _split(split: int, guarantee: Guarantee, root: Path, monkeypatch: pytest.MonkeyPatch
           ) -> dict[str, dict[str, float]]:
    """One split (module docstring): per arm with ≥ 50 routed test questions, its live coverage, its
    counts, the number routed and the share of trivial sets."""
    split = SEED * 1000 + split
    seed_ids(monkeypatch, split)
    rng = np.random.default_rng(1000 + split)
    fit_q, test_q = _questions(split, "fit", FIT, rng), _questions(split, "test", TEST, rng)
    sets = AnswerSetConfig(alpha=ALPHA, delta=0.05, guarantee=guarantee)
    arms, config = synthetic_pipeline(split, root, sets, PRICE, TEST)
    out: dict[str, dict[str, float]] = {}
    with Pipeline(config, root / f"state-{guarantee}-{split}", arms, FakeEncoder()) as pipe:
        fit_questions(pipe, fit_q, max_spend=1e9, echo=lambda _: None)
        kinds: dict[str, list[int]] = {n: [] for n in arms}
        covered: dict[str, list[bool]] = {n: [] for n in arms}
        trivial: dict[str, int] = {n: 0 for n in arms}
        for q in test_q:
            r = pipe.answer(q.text, list(q.choice_texts))
            kinds[r.arm].append(_kind(q.text))
            if r.answer_set is not None:
                covered[r.arm].append(q.gold[0] in r.answer_set.labels)
                trivial[r.arm] += "covers the truth trivially" in r.answer_set.statement
            pipe.feedback(r.decision, gold=q.gold[0])
        status = {a.name: a.coverage for a in pipe.status().arms}
    for name, ks in kinds.items():
        live = status[name]
        assert live.n == len(covered[name]) and live.covered == sum(covered[name])  # the pipeline's counts
        if len(ks) >= 50 and covered[name]:
            out[name] = {"coverage": live.covered / live.n, "covered": live.covered, "n": live.n,
                         "routed": len(ks),
                         "trivial": trivial[name] / len(covered[name])}
    return out


def _run(guarantee: Guarantee, monkeypatch: pytest.MonkeyPatch, splits: list[dict[str, dict[str, float]]]
         | None = None) -> dict[str, list[dict[str, float]]]:
    """Per arm, its rows over the splits (:func:`_split`); each split's rows also appended to ``splits``."""
    monkeypatch.setattr(fit_module, "MIN_CROSS_FIT", 10**9)
    base = "/dev/shm" if Path("/dev/shm").is_dir() else None  # the journal fsyncs every decision
    per_arm: dict[str, list[dict[str, float]]] = {n: [] for n in BOOST}
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        for s in range(SPLITS):
            split_rows = _split(s, guarantee, Path(tmp), monkeypatch)
            if splits is not None:
                splits.append(split_rows)
            for name, row in split_rows.items():
                per_arm[name].append(row)
    for name, rows in per_arm.items():
        cov = [r["coverage"] for r in rows]
        if cov:
            print(f"{guarantee} {name}: {len(rows)} splits with ≥ 50 routed; coverage ≥ {1 - ALPHA:g} on "
                  f"{np.mean(np.asarray(cov) >= 1 - ALPHA):.3f}, mean {np.mean(cov):.4f}, "
                  f"min {min(cov):.4f}; "
                  f"routed mean {np.mean([r['routed'] for r in rows]):.0f}; trivial sets in "
                  f"{np.mean([r['trivial'] for r in rows]):.3f} of the answers")
    return per_arm


def test_pac_sets_cover_per_arm_on_95_percent_of_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    per_arm = _run("pac", monkeypatch)
    assert sum(len(rows) >= SPLITS * 0.8 for rows in per_arm.values()) >= 2  # routing uses several arms
    for name, rows in per_arm.items():
        if len(rows) < 20:
            continue  # an arm the router rarely uses has no per-split coverage to speak of
        assert np.mean([r["trivial"] for r in rows]) < 0.05  # real sets, not every choice
        flagged = sum(below_beyond_noise(int(r["covered"]), int(r["n"]), ALPHA) for r in rows)
        allowed = allowed_flags(len(rows), 0.05)
        print(f"pac {name}: below {1 - ALPHA:g} beyond noise in {flagged} of {len(rows)} splits (allowed "
              f"{allowed})")
        assert flagged <= allowed, f"{name}: below its promise in {flagged} of {len(rows)} splits"


def test_pac_all_arms_sets_cover_every_arm_at_once_on_95_percent_of_splits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    splits: list[dict[str, dict[str, float]]] = []
    per_arm = _run("pac_all_arms", monkeypatch, splits)
    assert sum(len(rows) >= SPLITS * 0.8 for rows in per_arm.values()) >= 2
    every = [all(r["coverage"] >= 1 - ALPHA for r in rows.values()) for rows in splits if rows]
    arms = len(BOOST)
    flagged = sum(any(below_beyond_noise(int(r["covered"]), int(r["n"]), ALPHA, GAMMA / arms)
                      for r in rows.values()) for rows in splits if rows)
    allowed = allowed_flags(len(every), 0.05)  # γ/arms per arm: a split is flagged w.p. ≤ δ + (1 − δ)γ
    print(f"pac_all_arms: every arm ≥ {1 - ALPHA:g} at once on {np.mean(every):.3f} of {len(every)} splits; "
          f"some arm below beyond noise in {flagged} (allowed {allowed})")
    assert flagged <= allowed, f"some arm below its promise in {flagged} of {len(every)} splits"


def test_marginal_sets_cover_per_arm_on_average_over_splits(monkeypatch: pytest.MonkeyPatch) -> None:
    per_arm = _run("marginal", monkeypatch)
    for name, rows in per_arm.items():
        if len(rows) < 20:
            continue
        pops = np.asarray([r["coverage"] for r in rows])
        se = float(pops.std(ddof=1) / math.sqrt(len(pops)))
        assert pops.mean() >= 1 - ALPHA - 3 * se, f"{name}: mean coverage {pops.mean():.4f} ± {se:.4f}"
