"""UAG's UQ-aware candidate evaluator (Eq. 6): keep the candidates close to the LLM's generated answer.

An LLM answers from the retrieved reasoning paths (prompt of Table 5); the non-conformity score of a
candidate ``a`` is ``S1(a, Φ(P))`` against the whole generated text (``granularity="whole"``, Eq. 6 as
written). With ``granularity="items"`` a generation that lists several answers (one per line, as RoG's
does) is split into items and a candidate's score is its smallest S1 to any item. An empty generation
gives every candidate ``+∞``. The final set is ``{a ∈ C : S1(a, Φ(P)) ≤ t3}``.

Generations come from a :class:`Generator`: :class:`LLMGenerator` calls a live ``kgwise.llm.LLM``;
:class:`RecordedGenerations` replays recorded answers (e.g. RoG/LLaMA2-7B on WebQSP, which answered from
GNN-RAG's retrieved Freebase paths, not from this retriever's paths).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kgwise.conformal.retriever import QuestionPaths
from kgwise.conformal.scores import S1
from kgwise.errors import ConfigError, DataError
from kgwise.kg.base import KnowledgeGraph

__all__ = [
    "EvaluatorConfig",
    "Generator",
    "LLMGenerator",
    "RecordedGenerations",
    "UQEvaluator",
    "answer_items",
    "render_path",
]

FloatArray = npt.NDArray[np.float64]
TABLE5_PROMPT = "Based on the following reasoning paths: {paths}, {question}?"


@runtime_checkable
class Generator(Protocol):
    """Produces ``Φ(P)``: an answer to ``question_id`` from ``prompt``."""

    def generate(self, question_id: str, prompt: str) -> str: ...


class LLMGenerator:
    """Live generation with any ``kgwise.llm.LLM`` (greedy by default)."""

    def __init__(self, llm: object, max_tokens: int = 64, temperature: float = 0.0) -> None:
        if not callable(getattr(llm, "generate", None)):
            raise ConfigError("LLMGenerator needs an object with generate(prompt, ...)")
        self.llm = llm
        self.max_tokens = max_tokens
        self.temperature = temperature

    def generate(self, question_id: str, prompt: str) -> str:
        gen = self.llm.generate(prompt, max_tokens=self.max_tokens, temperature=self.temperature)  # type: ignore[attr-defined]
        return str(gen.text)


class RecordedGenerations:
    """Recorded answers by question id; asking for an unrecorded id raises ``DataError``."""

    def __init__(self, answers: Mapping[str, str], source: str = "recorded generations") -> None:
        self.answers = dict(answers)
        self.source = source

    def generate(self, question_id: str, prompt: str) -> str:
        try:
            return self.answers[question_id]
        except KeyError:
            raise DataError(f"no recorded generation for question {question_id!r}", self.source) from None


def answer_items(text: str) -> list[str]:
    """The answers listed in a generation: its non-empty lines, stripped of list markers, deduplicated."""
    items: list[str] = []
    for line in text.splitlines():
        item = line.strip().lstrip("-*•").strip()
        if item and item not in items:
            items.append(item)
    return items


def render_path(kg: KnowledgeGraph, nodes: Sequence[int], rels: Sequence[tuple[int, bool]]) -> str:
    """``topic -> relation -> node -> …`` as in RoG's and UAG's prompts."""
    parts = [kg.label(nodes[0])]
    for (r, inv), n in zip(rels, nodes[1:], strict=True):
        name = kg.relation_name(r)
        parts += [f"{name} (inverse)" if inv else name, kg.label(n)]
    return " -> ".join(parts)


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """``max_prompt_paths``: reasoning paths shown to the LLM (the best by Eq. 5 score); ``granularity``:
    score against the ``whole`` generation, the min over its listed ``items``, or the min over ``both``
    (the items and the whole generation)."""

    prompt: str = TABLE5_PROMPT
    max_prompt_paths: int = 30
    granularity: Literal["whole", "items", "both"] = "whole"

    def __post_init__(self) -> None:
        if self.granularity not in ("whole", "items", "both"):
            raise ConfigError(f"granularity must be 'whole', 'items' or 'both', got {self.granularity!r}")
        if "{paths}" not in self.prompt or "{question}" not in self.prompt:
            raise ConfigError("evaluator prompt must contain {paths} and {question}")
        if self.max_prompt_paths < 1:
            raise ConfigError("max_prompt_paths must be ≥ 1")


class UQEvaluator:
    """Eq. 6 scores of candidates against a generation, and the prompt that produces the generation."""

    def __init__(self, scorer: S1, generator: Generator | None = None, config: EvaluatorConfig | None = None
                 ) -> None:
        self.scorer = scorer
        self.generator = generator
        self.config = config or EvaluatorConfig()

    def prompt(self, question: str, path_lines: Sequence[str]) -> str:
        """Table 5's prompt; the question's trailing ``?`` is not doubled."""
        q = question.strip().rstrip("?").strip()
        return self.config.prompt.format(paths="; ".join(path_lines), question=q)

    def prompt_paths(self, kg: KnowledgeGraph, paths: QuestionPaths, t1: float = math.inf,
                     t2: float = math.inf) -> list[str]:
        """The retrieved reasoning paths (Eq. 4–5 at ``t1``/``t2``), best Eq. 5 score first."""
        keep = np.flatnonzero(paths.candidate & (paths.prefix <= t1) & (paths.collect <= t2))
        keep = keep[np.argsort(paths.collect[keep], kind="stable")][: self.config.max_prompt_paths]
        return [render_path(kg, *paths.path_of(int(i))) for i in keep]

    def generate(self, question_id: str, question: str, path_lines: Sequence[str]) -> str:
        """``Φ(P)``: the generator's answer from the paths."""
        if self.generator is None:
            raise ConfigError("UQEvaluator: no generator (pass an LLMGenerator or RecordedGenerations)")
        return self.generator.generate(question_id, self.prompt(question, path_lines))

    def scores(self, candidates: Sequence[str], generation: str,
               granularity: Literal["whole", "items", "both"] | None = None) -> FloatArray:
        """Eq. 6 score ``S1(a, Φ(P))`` of every candidate label (against the whole generation, or the min
        over its items, as configured or as ``granularity`` says)."""
        how = granularity or self.config.granularity
        items = answer_items(generation)
        if how == "whole" and items:
            items = ["\n".join(items)]
        elif how == "both" and len(items) > 1:
            items = [*items, "\n".join(items)]
        if not candidates:
            return np.zeros(0)
        if not items:
            return np.full(len(candidates), math.inf)
        return np.asarray(self.scorer.cross(list(candidates), items).min(axis=1), dtype=np.float64)

    @staticmethod
    def select(candidates: Sequence[str], scores: npt.ArrayLike, t3: float) -> list[str]:
        """Eq. 6: the candidates with score ≤ ``t3``, most similar first."""
        s = np.asarray(scores, dtype=np.float64)
        order = np.argsort(s, kind="stable")
        return [candidates[i] for i in order.tolist() if s[i] <= t3]
