"""Non-conformity scores, by name.

* Over the choices of a multiple-choice answer (:data:`CHOICE_SCORES`, :func:`choice_score`): ``lac``
  (``1 − p(choice)``, Sadinle et al. 2019) and ``aps`` (the total probability of the choices ranked at or
  above it, Romano et al. 2020), as computed by :mod:`kgwise.conformal.split`; a new score is one
  :func:`register_choice_score` call.
* Over an open question's candidates, fitted on UAG's tuning split (:data:`CANDIDATE_SCORES`,
  :func:`candidate_score`): ``learned``, a logistic regression on the candidate's table features
  (:mod:`kgwise.conformal.learned`). Naming one in ``UAGConfig.evaluator_scores`` adds its threshold
  to UAG's family; a new score is one :func:`register_candidate_score` call.
* UAG's S1 between texts (Eq. 4–6): ``1 − cos`` of all-MiniLM-L6-v2 embeddings, or L1 (ablation). Both
  texts are embedded with an :class:`~kgwise.embed.Encoder` (batched, disk-cached for ``MiniLM``); larger
  means less similar. Texts are deduplicated before encoding, so scoring many pairs that share texts (a
  question against every relation of the KG) costs one encoding per distinct text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from kgwise.conformal.grid import TableBatch
from kgwise.conformal.learned import LogisticCandidateScore
from kgwise.conformal.split import aps_scores, lac_scores
from kgwise.embed import Encoder, cosine_distance
from kgwise.errors import ConfigError

__all__ = ["CANDIDATE_SCORES", "CHOICE_SCORES", "S1", "CandidateScoreRule", "CandidateScorer",
           "ChoiceScoreRule", "Metric", "ScoreConfig", "candidate_score", "choice_score", "join_texts",
           "register_candidate_score", "register_choice_score", "verbalise_relation"]

Metric = Literal["cosine", "l1"]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class ChoiceScoreRule:
    """A named non-conformity score over the choices: ``rule(probs)`` maps a ``(questions, choices)``
    probability array to each (question, choice)'s score (larger: less conforming); ``source``: where the
    score comes from."""

    name: str
    source: str
    scores: Callable[[npt.ArrayLike], npt.NDArray[np.float64]]

    def __call__(self, probs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return self.scores(probs)


CHOICE_SCORES: dict[str, ChoiceScoreRule] = {}
"""The registered choice scores by name, in registration order."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_Rule = TypeVar("_Rule", bound=_Named)


def _register(table: dict[str, _Rule], rule: _Rule, kind: str, *others: dict[str, Any]) -> _Rule:
    """Add ``rule`` to ``table`` by its name; an empty name, or one in ``table`` or ``others``, is an
    error."""
    if not rule.name or any(rule.name in t for t in (table, *others)):
        raise ConfigError(f"{kind} name {rule.name!r} is empty or registered twice")
    table[rule.name] = rule
    return rule


def _named(table: dict[str, _Rule], name: str, kind: str) -> _Rule:
    found = table.get(name)
    if found is None:
        raise ConfigError(f"unknown {kind} {name!r}; choose one of {', '.join(table)}")
    return found


def register_choice_score(rule: ChoiceScoreRule) -> ChoiceScoreRule:
    """Make ``rule`` known by its name; a name taken twice is an error."""
    return _register(CHOICE_SCORES, rule, "choice score")


def choice_score(name: str) -> ChoiceScoreRule:
    """The registered choice score ``name``; ``ConfigError`` listing the names for an unknown one."""
    return _named(CHOICE_SCORES, name, "non-conformity score")


LAC = register_choice_score(ChoiceScoreRule("lac", "Sadinle et al. 2019", lac_scores))
APS = register_choice_score(ChoiceScoreRule("aps", "Romano et al. 2020, non-randomised", aps_scores))


class CandidateScorer(Protocol):
    """A fitted candidate score: each candidate node's non-conformity in a batch of UAG tables (larger:
    less conforming), and its JSON form."""

    def scores(self, batch: TableBatch) -> npt.NDArray[np.float64]: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class CandidateScoreRule:
    """A named non-conformity score over an open question's candidates, learned from data: ``fit(tune)``
    fits it on UAG's tuning split (never on calibration rows: that keeps the guarantee, see
    :mod:`kgwise.conformal.learned`), ``load(body)`` reads a ``to_dict`` back; ``source``: where it comes
    from."""

    name: str
    source: str
    fit: Callable[[TableBatch], CandidateScorer]
    load: Callable[[dict[str, Any]], CandidateScorer]


CANDIDATE_SCORES: dict[str, CandidateScoreRule] = {}
"""The registered candidate scores by name, in registration order."""


def register_candidate_score(rule: CandidateScoreRule) -> CandidateScoreRule:
    """Make ``rule`` known by its name; a name taken twice (or a choice score's) is an error."""
    return _register(CANDIDATE_SCORES, rule, "candidate score", CHOICE_SCORES)


def candidate_score(name: str) -> CandidateScoreRule:
    """The registered candidate score ``name``; ``ConfigError`` listing the names for an unknown one."""
    return _named(CANDIDATE_SCORES, name, "candidate score")


LEARNED = register_candidate_score(CandidateScoreRule(
    "learned", "logistic regression on UAG's table features (kgwise.conformal.learned)",
    LogisticCandidateScore.fit, LogisticCandidateScore.from_dict))


def verbalise_relation(name: str, inverse: bool = False) -> str:
    """A relation name as words: ``people.person.place_of_birth`` → ``people person place of birth``;
    an edge followed backwards is prefixed ``inverse of``."""
    words = " ".join(name.replace(".", " ").replace("_", " ").split())
    return f"inverse of {words}" if inverse else words


def join_texts(parts: Sequence[str]) -> str:
    """The concatenation ``‖`` of Eq. 4–5 (question and relations, or a relation path)."""
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    """``metric``: ``cosine`` (UAG's S1, ``1 − cos``) or ``l1`` (the paper's Fig. 4b ablation, ``‖a − b‖₁``
    of the unit-norm embeddings)."""

    metric: Metric = "cosine"

    def __post_init__(self) -> None:
        if self.metric not in ("cosine", "l1"):
            raise ConfigError(f"score metric must be 'cosine' or 'l1', got {self.metric!r}")


class S1:
    """The score ``S1(a, b)`` between texts; ``encoder`` defaults to :class:`kgwise.embed.MiniLM`."""

    def __init__(self, encoder: Encoder | None = None, config: ScoreConfig | None = None) -> None:
        if encoder is None:
            from kgwise.embed import MiniLM

            encoder = MiniLM()
        self.encoder = encoder
        self.config = config or ScoreConfig()

    def embed(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.float32], dict[str, int]]:
        """Embeddings of the distinct ``texts`` and each text's row."""
        index: dict[str, int] = {}
        for t in texts:
            index.setdefault(t, len(index))
        if not index:
            return np.zeros((0, self.encoder.dim), dtype=np.float32), index
        return np.asarray(self.encoder.encode(list(index)), dtype=np.float32), index

    def between(self, a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> FloatArray:
        """Row-wise score of two aligned embedding matrices."""
        if a.shape != b.shape:
            raise ConfigError(f"score: embedding shapes differ, {a.shape} vs {b.shape}")
        if self.config.metric == "cosine":
            return cosine_distance(a, b)
        return np.asarray(np.abs(a - b).sum(axis=1), dtype=np.float32)

    def pairs(self, left: Sequence[str], right: Sequence[str]) -> FloatArray:
        """``S1(left[i], right[i])`` for every ``i``."""
        if len(left) != len(right):
            raise ConfigError(f"score: {len(left)} left texts but {len(right)} right texts")
        emb, index = self.embed([*left, *right])
        li = np.fromiter((index[t] for t in left), dtype=np.int64, count=len(left))
        ri = np.fromiter((index[t] for t in right), dtype=np.int64, count=len(right))
        return self.between(emb[li], emb[ri])

    def cross(self, left: Sequence[str], right: Sequence[str]) -> FloatArray:
        """The ``len(left) × len(right)`` matrix of ``S1(left[i], right[j])``."""
        emb, index = self.embed([*left, *right])
        a = emb[[index[t] for t in left]] if left else np.zeros((0, self.encoder.dim), np.float32)
        b = emb[[index[t] for t in right]] if right else np.zeros((0, self.encoder.dim), np.float32)
        if self.config.metric == "cosine":
            # in float64: a float32 product's last bit depends on where a row sits in the BLAS blocks, so
            # the same pair would score differently when the graph numbers its nodes differently
            return np.asarray(1.0 - a.astype(np.float64) @ b.astype(np.float64).T, dtype=np.float32)
        return np.asarray(np.abs(a[:, None, :] - b[None, :, :]).sum(axis=2), dtype=np.float32)
