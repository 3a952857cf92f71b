"""What is known of a question before any paid arm is called — the success predictor's features — built the
same way from a graded log (a fit, a replay) and from live answers (``Pipeline.answer``).

A row is, in this order:

* every value of each free arm's ``signals`` (padded with 0 to the arm's width fitted on the log; a
  KG model's top choice probability, its margin over the second, the entropy of its distribution);
* the free context row :func:`~kgwise.route.table.free_signal_row`: whether the free arms agree, each
  one's first signal, agreement × the smallest;
* the question's form (:func:`question_form`);
* the first ``dims`` principal components of the question embedding (fitted on the log's questions), at
  most one per :data:`QUESTIONS_PER_COMPONENT` questions fitted on.

A map made with ``form=False`` and ``dims=0`` keeps the first two parts alone — the free arms' confidence
— what the ``predicted-free`` router context reads (:data:`FREE_ONLY`).

:class:`PredictedContext` turns a row into the router context ``[1, p_1(x) … p_m(x)]``: each arm's
predicted success (:class:`~kgwise.route.predictor.SuccessPredictor`), with LinUCB's intercept first — the
context a Coke router starts from when it routes on the predictor (``[router] context = "predicted"``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.route.predictor import SuccessPredictor
from kgwise.route.table import free_signal_row

__all__ = ["FORM_NAMES", "FREE_ONLY", "QUESTIONS_PER_COMPONENT", "FreeOutput", "PreCallFeatures",
           "PredictedContext", "context_rows", "question_form"]

Matrix = npt.NDArray[np.float64]
FREE_ONLY = "predicted-free"
"""The router context whose predictor reads the free arms' confidence alone (no form, no embedding). On the
tuning logs, the priced router on these features answered +1.6 points over the best arm on OBQA's local
log and +0.6 on WebQSP's, against +0.5 and 0.0 with every feature (``kgwise eval route``'s learned part,
policy ``predicted-free``, 5 halvings, without refits; with them +2.1 and +0.4,
``docs/measurements/routing_all_logs.sh``): the form and the embedding's components are what overfit. On
the logs not tuned on it did not help (``docs/routing.md``)."""
FreeOutput = tuple[str, Sequence[float]]
"""A free arm's answer on a question (``""``: none) and its signals."""

QUESTIONS_PER_COMPONENT = 20
"""Questions a predictor learns from per embedding component among its features. On OBQA's local log
(150-question fit halves, tuned on) 16 components gave the priced router .456, 8 .468, 6 .460, 4 .464,
0 .465 (`learned_report`, 5 halvings): per-arm regressions on 16 components of a 150-question log overfit;
WebQSP's 789-question halves keep all 16."""
_WH = ("what", "which", "who", "where", "when", "how", "why")
FORM_NAMES = ("form.words", "form.capitals", "form.number", *(f"form.{w}" for w in _WH), "form.clauses")


def question_form(text: str) -> list[float]:
    """What a question's wording says about it, before any arm answers: its length in words (/ 20), its
    count of words that start with a capital after the first (named entities, / 5), whether it holds a
    number, its wh-word (one-hot over what, which, who, where, when, how, why) and whether it joins two
    clauses (and / that / whose / of the, the compositional questions of CWQ)."""
    words = text.split()
    first = words[0].lower().strip("?,.") if words else ""
    lower = text.lower()
    return [len(words) / 20.0,
            sum(w[:1].isupper() for w in words[1:]) / 5.0,
            float(bool(re.search(r"\d", text))),
            *(float(first == w or f" {w} " in f" {lower[:40]} ") for w in _WH),
            float(bool(re.search(r"\b(and|that|whose|of the)\b", lower)))]


@dataclass(frozen=True)
class PreCallFeatures:
    """The feature map (module docstring): the free arms and their signal widths, the embedding's
    principal axes (``mean``, ``axes``: dims × embedding width), and whether the question's form is read."""

    free_arms: tuple[str, ...]
    widths: tuple[int, ...]
    mean: Matrix
    axes: Matrix
    form: bool = True

    @classmethod
    def fit(cls, free: Mapping[str, Sequence[FreeOutput]], embeddings: npt.ArrayLike, dims: int = 16,
            form: bool = True) -> PreCallFeatures:
        """The map of a log: ``free[arm][i]`` the free arm's output on question ``i``; ``embeddings`` the
        questions' (n × d), whose first ``dims`` principal axes are kept (at most one per
        :data:`QUESTIONS_PER_COMPONENT` questions); ``form``: whether the question's form is read."""
        E = np.atleast_2d(np.asarray(embeddings, dtype=np.float64))
        if dims < 0:
            raise ConfigError(f"embedding dims must be ≥ 0, got {dims}")
        mean = E.mean(axis=0) if len(E) else np.zeros(E.shape[1])
        axes = np.zeros((0, E.shape[1]))
        dims = min(dims, len(E) // QUESTIONS_PER_COMPONENT)
        if dims and len(E) > 1:
            _, _, Vt = np.linalg.svd(E - mean, full_matrices=False)
            axes = Vt[:dims]
        names = tuple(free)
        widths = tuple(max((len(s) for _, s in free[a]), default=0) for a in names)
        return cls(names, widths, mean, axes, form)

    @property
    def width(self) -> int:
        k = len(self.free_arms)
        return sum(self.widths) + (k + 2 if k else 0) + len(FORM_NAMES) * self.form + len(self.axes)

    def row(self, text: str, embedding: npt.ArrayLike, free: Mapping[str, FreeOutput]) -> Matrix:
        """One question's features; a free arm missing from ``free`` (it could not answer) counts as no
        answer and zero signals."""
        out: list[float] = []
        outputs = [free.get(a, ("", ())) for a in self.free_arms]
        for (_, s), w in zip(outputs, self.widths, strict=True):
            vals = [float(v) for v in list(s)[:w]]
            out += vals + [0.0] * (w - len(vals))
        if self.free_arms:
            out += free_signal_row([(ans, float(s[0]) if len(s) else 0.0) for ans, s in outputs])
        if self.form:
            out += question_form(text)
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if len(self.axes):
            if x.shape[0] != self.axes.shape[1]:
                raise ConfigError(f"a {x.shape[0]}-d embedding for features fitted on "
                                  f"{self.axes.shape[1]}-d ones")
            out += list((x - self.mean) @ self.axes.T)
        return np.asarray(out, dtype=np.float64)

    def rows(self, texts: Sequence[str], embeddings: npt.ArrayLike,
             free: Mapping[str, Sequence[FreeOutput]]) -> Matrix:
        """:meth:`row` of every question (``free[arm][i]``: the arm's output on question ``i``)."""
        E = np.atleast_2d(np.asarray(embeddings, dtype=np.float64))
        return np.stack([self.row(t, E[i], {a: free[a][i] for a in self.free_arms if a in free})
                         for i, t in enumerate(texts)]).reshape(len(texts), self.width)

    def to_dict(self) -> dict[str, Any]:
        return {"free_arms": list(self.free_arms), "widths": list(self.widths), "mean": self.mean.tolist(),
                "axes": self.axes.tolist(), "form": self.form}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PreCallFeatures:
        axes = np.asarray(d["axes"], dtype=np.float64)
        mean = np.asarray(d["mean"], dtype=np.float64)
        # a state written before the form could be left out read it
        return cls(tuple(map(str, d["free_arms"])), tuple(int(w) for w in d["widths"]), mean,
                   axes.reshape(-1, mean.shape[0]), bool(d.get("form", True)))


@dataclass(frozen=True)
class PredictedContext:
    """The router context ``[1, p_1(x) … p_m(x)]`` (module docstring)."""

    features: PreCallFeatures
    predictor: SuccessPredictor

    @property
    def width(self) -> int:
        return 1 + self.predictor.n_arms

    def vector(self, text: str, embedding: npt.ArrayLike, free: Mapping[str, FreeOutput]) -> Matrix:
        p = self.predictor.predict(self.features.row(text, embedding, free)[None, :])[0]
        return np.concatenate([[1.0], p])

    def to_dict(self) -> dict[str, Any]:
        return {"features": self.features.to_dict(), "predictor": self.predictor.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PredictedContext:
        try:
            return cls(PreCallFeatures.from_dict(d["features"]), SuccessPredictor.from_dict(d["predictor"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a valid predicted-context state: {exc!r}") from exc


def context_rows(P: npt.ArrayLike) -> Matrix:
    """``[1, p_1 … p_m]`` per row of predicted successes ``P``."""
    P_ = np.atleast_2d(np.asarray(P, dtype=np.float64))
    return np.hstack([np.ones((P_.shape[0], 1)), P_])
