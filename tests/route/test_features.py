"""The success predictor's pre-call features and the ``predicted`` router context."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeRouter
from kgwise.route.features import (
    FORM_NAMES,
    QUESTIONS_PER_COMPONENT,
    PreCallFeatures,
    PredictedContext,
    question_form,
)
from kgwise.route.predictor import SuccessPredictor


def _fitted(n: int = 60) -> tuple[PredictedContext, np.ndarray]:
    rng = np.random.default_rng(0)
    E = rng.normal(size=(n, 6))
    sure = rng.random(n) < 0.5
    free = {"kgm": [("A" if s else "B", (0.9 if s else 0.3, 0.5)) for s in sure]}
    features = PreCallFeatures.fit(free, E, dims=3)
    F = features.rows([f"question {i}?" for i in range(n)], E, free)
    Y = np.stack([sure, ~sure], axis=1).astype(float)  # the free arm is right exactly when it is sure
    return PredictedContext(features, SuccessPredictor(2).fit(F, Y)), E


def test_a_row_is_signals_free_context_form_and_embedding_components() -> None:
    model, E = _fitted()
    f = model.features
    assert f.widths == (2,) and f.width == 2 + 3 + len(FORM_NAMES) + 3
    row = f.row("Who wrote Hamlet?", E[0], {"kgm": ("A", (0.8,))})
    assert list(row[:2]) == [0.8, 0.0]  # padded to the arm's width
    assert list(row[2:5]) == [1.0, 0.8, 0.8]  # one free arm: it agrees with itself
    assert list(row[5:5 + len(FORM_NAMES)]) == question_form("Who wrote Hamlet?")
    missing = f.row("Who wrote Hamlet?", E[0], {})
    assert list(missing[:5]) == [0.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(ConfigError, match="4-d embedding"):
        f.row("x", np.zeros(4), {})


def test_the_context_reads_the_free_arm_and_survives_the_routers_state() -> None:
    model, E = _fitted()
    sure = model.vector("question 1?", E[1], {"kgm": ("A", (0.9, 0.5))})
    unsure = model.vector("question 1?", E[1], {"kgm": ("B", (0.3, 0.5))})
    assert sure[0] == 1.0 and sure[1] > unsure[1] and sure[2] < unsure[2]
    router = CokeRouter([ArmSpec("kgm", "KGM", 0.5), ArmSpec("llm", "LLM", 0.5)], model.width)
    router.context_model = model.to_dict()
    again = CokeRouter.from_state_dict(router.state_dict())
    assert again.context_model is not None
    kept = PredictedContext.from_dict(again.context_model)
    assert np.allclose(kept.vector("question 1?", E[1], {"kgm": ("A", (0.9, 0.5))}), sure)
    with pytest.raises(ConfigError, match="predicted-context"):
        PredictedContext.from_dict({"features": {}})


def test_a_free_only_map_reads_the_free_arms_confidence_alone_and_keeps_that_in_its_state() -> None:
    E = np.random.default_rng(0).normal(size=(60, 6))
    free = {"kgm": [("A", (0.9, 0.5))] * 60}
    f = PreCallFeatures.fit(free, E, dims=0, form=False)
    assert f.width == 2 + 3 and len(f.axes) == 0
    row = f.row("Who wrote Hamlet?", E[0], {"kgm": ("A", (0.8, 0.1))})
    assert list(row) == [0.8, 0.1, 1.0, 0.8, 0.8]  # signals and the free context: no form, no components
    again = PreCallFeatures.from_dict(f.to_dict())
    assert not again.form and np.array_equal(again.row("Who?", E[0], {}), f.row("Who?", E[0], {}))
    older = {k: v for k, v in PreCallFeatures.fit(free, E, dims=2).to_dict().items() if k != "form"}
    assert PreCallFeatures.from_dict(older).form  # a state from before the flag reads the form, as it did


@pytest.mark.parametrize("n, dims, kept", [(19, 16, 0), (20, 16, 1), (59, 16, 2), (60, 3, 3), (100, 3, 3),
                                           (319, 16, 15), (400, 16, 16), (1000, 16, 16)])
def test_the_embedding_keeps_at_most_one_component_per_20_questions_and_16(n: int, dims: int,
                                                                          kept: int) -> None:
    E = np.random.default_rng(1).normal(size=(n, 24))
    features = PreCallFeatures.fit({}, E) if dims == 16 else PreCallFeatures.fit({}, E, dims=dims)
    assert min(dims, n // QUESTIONS_PER_COMPONENT) == kept
    assert features.axes.shape == (kept, 24) and features.width == len(FORM_NAMES) + kept
    assert features.row("Who wrote Hamlet?", E[0], {}).shape == (len(FORM_NAMES) + kept,)
