"""Cross-check against MAPIE 1.x: our LAC sets equal ``SplitConformalClassifier``'s. (MAPIE's APS sets are
built differently — the label crossing the quantile is handled by its ``include_last_label`` rule — so
our non-randomised APS is checked against its definition in ``test_split.py`` instead.)"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from kgwise.conformal.split import SplitConformal, SplitConformalConfig


class ProbabilitiesAsFeatures(ClassifierMixin, BaseEstimator):
    """Test double: a 'classifier' whose features already are its class probabilities."""

    def fit(self, X: npt.NDArray[np.float64], y: npt.NDArray[np.int64]) -> ProbabilitiesAsFeatures:
        self.classes_ = np.arange(X.shape[1])
        return self

    def predict_proba(self, X: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(X)

    def predict(self, X: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return np.asarray(X).argmax(axis=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lac_equals_mapie(seed: int) -> None:
    from mapie.classification import SplitConformalClassifier

    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(600, 5)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(5, p=row) for row in probs])
    est = ProbabilitiesAsFeatures().fit(probs, y)
    mapie = SplitConformalClassifier(estimator=est, confidence_level=0.8, conformity_score="lac", prefit=True)
    mapie.conformalize(probs[:300], y[:300])
    theirs = mapie.predict_set(probs[300:])[1][:, :, 0]
    ours = SplitConformal(SplitConformalConfig(alpha=0.2, score="lac")).conformalize(probs[:300], y[:300])
    np.testing.assert_array_equal(ours.predict_set(probs[300:]), theirs)
