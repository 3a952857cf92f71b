"""A newcomer's dev log (50 labelled multiple-choice questions, 4 arms) over 50 random splits
(``pytest -m guarantee``): the pipeline's sets at α = 0.2 with ``guarantee = "pac"`` (δ = 0.05) under each
small-data rule, measured in the same run, each checked against the guarantee it states.

Synthetic i.i.d. questions of two kinds and four arms (a free KG-model-like arm sure on kind 0, three
LLM-like arms of rising skill and price; ``test_pipeline_sets``' generator). Per split a fresh pipeline is
fitted on 50 questions (25 held out, re-selected by the router at each answer) and answers 1,000 fresh
ones with feedback. Everything is seeded — the questions, the router, the decision ids (whose hash seeds
the held-out questions' re-routing draws) and the fit's id (whose hash seeds ``calibrate_on = "arm"``'s
coins) — from the split and ``KGWISE_GUARANTEE_SEED`` (default 0): a run repeats exactly, another seed
draws other splits.

The rules and what each promises (:mod:`kgwise.app.calibration`):

* default (``calibrate_on = "routed"``, ``fallback = "held_out"``): a set calibrated on the held-out
  questions the router sends the arm covers the questions routed to the arm; when those are too few (PAC at
  α = 0.2 needs 14) the set is calibrated on all 25 held-out questions the arm answered and covers *a
  question like the dev log answered by the arm*, not conditional on routing;
* ``fallback = "all_dev"``: that fallback on all 50 graded dev questions the arm answered (same promise);
* ``calibrate_on = "arm"``: every set of the arm from those 50, ties split by a seeded coin (same promise).

Checked per split and arm, each against its own promise (the default's two promises apart, each with its
own allowance), flagged only when below 1 − α beyond noise and allowed as many flagged splits as a valid
method reaches except with probability 0.001 per assertion
(:mod:`tests.guarantees.bounds`: at δ = 0.05, γ = 0.01 a split is flagged with probability ≤ 0.0595, and
50 splits allow 9):

* routed promise: the coverage over the arm's routed test questions whose set came from routed
  calibration questions (≥ 50 of them);
* "like the dev log" promises: the coverage of the arm's set over *all* 1,000 test questions (the arm's
  own answer to each, the fixed fallback threshold of the split), for every arm that fell back in the
  split (default, ``all_dev``) and for every arm (``calibrate_on = "arm"``).

Printed beside them, not asserted (no rule promises it): each arm's share of splits whose *routed*
coverage is ≥ 1 − α, the figure an earlier version of this test asserted ≥ 90 % for — a threshold that a
valid method misses often (the finite test sample alone puts an arm whose coverage is 1 − α below it half
the time), and the reason that version failed (one arm at .88) without any rule being invalid.
Asserted besides: ``calibrate_on = "arm"``'s mean set size ≤ 2 and ≤ the default's (the regime it is
for), and that sets fell back in this regime at all.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.calibration import (
    HeldOutCalibration,
    arm_set,
    calibrated_threshold,
    choice_set,
    fallback_scores,
)
from kgwise.app.config import AnswerSetConfig
from kgwise.app.fit import fit_questions
from kgwise.app.pipeline import Pipeline
from kgwise.types import Question

from . import test_pipeline_sets as base
from .bounds import allowed_flags, below_beyond_noise

pytestmark = pytest.mark.guarantee

ALPHA, DELTA = 0.2, 0.05
SPLITS = int(os.environ.get("KGWISE_GUARANTEE_SPLITS", "50"))
FIT, TEST = 50, 1000
MIN_ROUTED = 50
ARMS = {"kgm": ((6.0, 0.3), 0.0), "small": ((1.5, 1.5), 0.001), "medium": ((2.5, 2.0), 0.003),
        "large": ((4.0, 3.0), 0.01)}
RULES = ("default", "all_dev", "arm")
CHECKS = ("default", "default_fallback", "all_dev", "arm")
"""The promises checked, each with its own allowance: the default's routed promise (``default``) and its
fallback's "like the dev log" one (``default_fallback``) are two events, so they are not merged into one
flag."""
SEED = base.SEED


@dataclass
class SplitResult:
    """One split: per rule the set sizes of its answers; per check (:data:`CHECKS`) and arm whether it is
    flagged (below its promise beyond noise; absent: the promise has nothing to check in this split); per
    rule and arm its routed coverage (≥ :data:`MIN_ROUTED` routed answers); the share of answers that fell
    back."""

    sizes: dict[str, list[int]] = field(default_factory=lambda: {r: [] for r in RULES})
    flagged: dict[str, dict[str, bool]] = field(default_factory=lambda: {c: {} for c in CHECKS})
    routed: dict[str, dict[str, float]] = field(default_factory=lambda: {r: {} for r in RULES})
    fell_back: float = 0.0


SetOf = Callable[[Question, Mapping[str, float], list[str]], Sequence[str]]


def _at(kind: str, threshold: float) -> SetOf:
    return lambda q, p, labels: choice_set(p, labels, kind, threshold)


def _arm_rule(cal: HeldOutCalibration, arm: str, sets: AnswerSetConfig, arms: int) -> SetOf:
    return lambda q, p, labels: arm_set(cal, arm, p, labels, q.text, sets, arms).labels


def _covered_all(arm: base.SyntheticArm, test_q: list[Question], set_of: SetOf) -> int:
    """How many of ``test_q`` the set ``set_of(question, probabilities, labels)`` of ``arm``'s own answer
    covers."""
    hits = 0
    for q in test_q:
        out = arm.answer(q)
        hits += q.gold[0] in set_of(q, out.probabilities, [c.label for c in q.choices])
    return hits


def _split(split: int, root: Path, monkeypatch: pytest.MonkeyPatch) -> SplitResult:
    key = SEED * 1000 + split
    base.seed_ids(monkeypatch, key)
    rng = np.random.default_rng(9000 + key)
    fit_q, test_q = base._questions(key, "fit", FIT, rng), base._questions(key, "test", TEST, rng)
    sets = AnswerSetConfig(alpha=ALPHA, delta=DELTA, guarantee="pac")
    arms, config = base.synthetic_pipeline(key, root, sets, {n: p for n, (_, p) in ARMS.items()}, TEST)
    k = len(arms)
    out = SplitResult()
    hit: dict[str, dict[str, list[bool]]] = {r: {n: [] for n in arms} for r in RULES}  # every routed answer
    routed_cal: dict[str, list[bool]] = {n: [] for n in arms}  # default sets from routed calibration
    fell: set[str] = set()
    backs = 0
    with Pipeline(config, root / f"state-{key}", arms, base.FakeEncoder()) as pipe:
        fit_questions(pipe, fit_q, max_spend=1e9, echo=lambda _: None)
        cal = pipe.state.calibration
        assert cal is not None
        dev = replace(sets, fallback="all_dev")
        dev_threshold = {n: calibrated_threshold(fallback_scores(cal, n, dev).tolist(), sets, k)
                         for n in arms}
        held_threshold = {n: calibrated_threshold(fallback_scores(cal, n, sets).tolist(), sets, k)
                          for n in arms}
        for q in test_q:
            r = pipe.answer(q.text, list(q.choice_texts))
            s = r.answer_set
            assert s is not None
            labels = [c.label for c in q.choices]
            got = {"default": s.labels,
                   "all_dev": (choice_set(r.probabilities, labels, cal.kind, dev_threshold[r.arm]) if s.pooled
                               else s.labels),
                   "arm": arm_set(cal, r.arm, r.probabilities, labels, q.text, sets, k).labels}
            for rule, st in got.items():
                out.sizes[rule].append(len(st))
                hit[rule][r.arm].append(q.gold[0] in st)
            if not s.pooled:
                routed_cal[r.arm].append(q.gold[0] in s.labels)
            if s.pooled:
                backs += 1
                fell.add(r.arm)
            pipe.feedback(r.decision, gold=q.gold[0])
    out.fell_back = backs / len(test_q)
    for name in arms:
        for rule in RULES:
            if len(hit[rule][name]) >= MIN_ROUTED:
                out.routed[rule][name] = float(np.mean(hit[rule][name]))
        mine = routed_cal[name]
        if len(mine) >= MIN_ROUTED:  # the routed promise (the default's and all_dev's: the same sets)
            out.flagged["default"][name] = below_beyond_noise(sum(mine), len(mine), ALPHA)
        # the "like the dev log" promises: the arm's sets over all test questions
        checks = {"arm": _arm_rule(cal, name, sets, k)}
        if name in fell:
            checks["default_fallback"] = _at(cal.kind, held_threshold[name])
            checks["all_dev"] = _at(cal.kind, dev_threshold[name])
        for rule, make in checks.items():
            c = _covered_all(arms[name], test_q, make)
            out.flagged[rule][name] = below_beyond_noise(c, TEST, ALPHA)
    return out


def test_a_newcomers_log_gets_small_sets_that_keep_their_promises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BOOST", {n: b for n, (b, _) in ARMS.items()})  # SyntheticArm reads it
    monkeypatch.setattr(base.fit_module, "MIN_CROSS_FIT", 10**9)
    tmpdir = "/dev/shm" if Path("/dev/shm").is_dir() else None
    results: list[SplitResult] = []
    with tempfile.TemporaryDirectory(dir=tmpdir) as tmp:
        for s in range(SPLITS):
            results.append(_split(s, Path(tmp), monkeypatch))
    size = {rule: float(np.mean([np.mean(r.sizes[rule]) for r in results])) for rule in RULES}
    print(f"seed {SEED}: {FIT} dev questions, α = {ALPHA}, δ = {DELTA}, {SPLITS} splits: mean set size "
          "of 4 — "
          + ", ".join(f"{rule} {v:.2f}" for rule, v in size.items())
          + f"; answers that fell back {np.mean([r.fell_back for r in results]):.3f}")
    failures = []
    for rule in CHECKS:
        for name in ARMS:
            flags = [r.flagged[rule][name] for r in results if name in r.flagged[rule]]
            routed = [r.routed[rule][name] for r in results if name in r.routed.get(rule, {})]
            allowed = allowed_flags(len(flags), DELTA) if flags else 0
            print(f"{rule} {name}: flagged {sum(flags)} of {len(flags)} splits (allowed {allowed})" + (
                "" if rule not in RULES else f"; routed coverage ≥ {1 - ALPHA:g} on " + (
                    f"{np.mean(np.asarray(routed) >= 1 - ALPHA):.2f} of {len(routed)} splits, mean "
                    f"{np.mean(routed):.3f}" if routed else "no split")))
            if len(flags) >= 10 and sum(flags) > allowed:
                failures.append(f"{rule} {name}: {sum(flags)} of {len(flags)} splits below their promise")
    assert not failures, failures
    assert np.mean([r.fell_back for r in results]) > 0  # the regime this test is about
    assert size["arm"] <= 2.0 and size["arm"] <= size["default"], size
