"""The data model: frozen, typed values that every step of kgwise passes along.

All types serialise to plain JSON-ready dicts with ``to_dict`` and back with ``from_dict``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from kgwise.errors import ConfigError

__all__ = [
    "CHOICE_LABELS",
    "Answer",
    "Choice",
    "GenerationSettings",
    "Path",
    "Question",
    "Serialisable",
    "Subgraph",
    "Triple",
    "Usage",
    "make_question",
]

CHOICE_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Labels of multiple-choice options, in order."""


class Serialisable:
    """Mixin: ``to_dict``/``to_json`` and ``from_dict``/``from_json`` for frozen dataclasses (those below, and
others whose fields are plain values, tuples, mappings and such dataclasses)."""

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        factories = {f.name: f.default_factory for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - set(factories)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
        return cls(**{k: _revive(cls, k, v, factories[k]) for k, v in data.items()})

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


_NESTED: dict[tuple[str, str], type[Serialisable]] = {}


def _revive(cls: type, name: str, value: Any, factory: Any) -> Any:
    """``value`` of field ``name`` as the field holds it: a dataclass made by its ``default_factory``
    ``factory`` (a :class:`Serialisable`) or named in :data:`_NESTED` (each item of a tuple of them) from
    its dict."""
    if isinstance(factory, type) and issubclass(factory, Serialisable) and isinstance(value, Mapping):
        return factory.from_dict(value)
    nested = _NESTED.get((cls.__name__, name))
    if nested is not None and value is not None:
        if isinstance(value, list):
            return tuple(nested.from_dict(v) for v in value)
        return nested.from_dict(value)
    if isinstance(value, list):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return value


@dataclass(frozen=True, slots=True)
class Choice(Serialisable):
    """One answer option of a multiple-choice question."""

    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Question(Serialisable):
    """A question: multiple choice (``choices`` set, ``gold`` holds labels) or open KGQA (``gold`` holds
    answer names, aliases included)."""

    id: str
    text: str
    choices: tuple[Choice, ...] = ()
    gold: tuple[str, ...] = ()
    topic_entities: tuple[str, ...] = ()
    dataset: str = ""
    split: str = ""
    concept: str = ""
    context: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"question {self.id!r}: empty question text")
        for name in ("gold", "topic_entities"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{self.ref}: {name!r} must be a list of strings, got {value!r}")
        labels = [c.label for c in self.choices]
        if len(set(labels)) != len(labels):
            raise ValueError(f"{self.ref}: duplicate choice labels {labels}")

    @property
    def ref(self) -> str:
        """How messages name the question: by id, or by its text when it has none (a user's question)."""
        if self.id:
            return f"question {self.id!r}"
        return f"the question {self.text if len(self.text) <= 60 else self.text[:57] + '...'!r}"

    @property
    def is_multiple_choice(self) -> bool:
        return bool(self.choices)

    @property
    def gold_index(self) -> int:
        """Index of the (first) gold choice; raises if the question has none."""
        for i, c in enumerate(self.choices):
            if c.label in self.gold:
                return i
        raise ValueError(f"{self.ref} has no gold choice among {[c.label for c in self.choices]}")

    @property
    def choice_texts(self) -> tuple[str, ...]:
        return tuple(c.text for c in self.choices)


def make_question(text: str, choices: Sequence[str], qid: str = "", answer: str | None = None) -> Question:
    """A multiple-choice ``Question`` with choices labelled A, B, …, and ``answer`` (a label or a choice's
    text) as its gold when given; raises ``ConfigError`` for an empty text, fewer than two (or more than
    26) non-empty choices, a choice given twice, or an answer that is none of the choices."""
    if not text.strip():
        raise ConfigError("the question text is empty")
    opts = [c.strip() for c in choices if c.strip()]
    if not 2 <= len(opts) <= len(CHOICE_LABELS):
        raise ConfigError(f"a question needs 2 to {len(CHOICE_LABELS)} non-empty choices, got {len(opts)}")
    folded = [c.casefold() for c in opts]
    if len(set(folded)) != len(folded):
        twice = next(c for i, c in enumerate(opts) if folded[i] in folded[:i])
        raise ConfigError(f"the choice {twice!r} is given twice")
    labelled = tuple(Choice(CHOICE_LABELS[i], t) for i, t in enumerate(opts))
    gold: tuple[str, ...] = ()
    if answer is not None:
        match = [c.label for c in labelled if answer.strip() in (c.label, c.text) or
                 answer.strip().casefold() == c.text.casefold()]
        if not match:
            raise ConfigError(f"the answer {answer!r} is none of the choices' labels or texts")
        gold = (match[0],)
    return Question(qid, text, labelled, gold)


@dataclass(frozen=True, slots=True)
class Triple(Serialisable):
    """A fact ``(head, relation, tail)`` by label."""

    head: str
    relation: str
    tail: str

    def __iter__(self) -> Iterator[str]:
        return iter((self.head, self.relation, self.tail))


@dataclass(frozen=True, slots=True)
class Path(Serialisable):
    """A relation path ``n0 -r1-> n1 -r2-> … nk`` over KG node and relation ids.

    ``inverse[i]`` is true when hop ``i`` follows edge ``relations[i]`` backwards (``n_{i+1} -r-> n_i``).
    """

    nodes: tuple[int, ...]
    relations: tuple[int, ...]
    inverse: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if len(self.nodes) != len(self.relations) + 1:
            raise ValueError(f"path with {len(self.nodes)} nodes needs {len(self.nodes) - 1} relations")
        if not self.inverse:
            object.__setattr__(self, "inverse", (False,) * len(self.relations))
        elif len(self.inverse) != len(self.relations):
            raise ValueError("path: one inverse flag per relation")

    def __len__(self) -> int:
        return len(self.relations)

    def edges(self) -> Iterator[tuple[int, int, int]]:
        """The path's hops as stored edges ``(head, relation, tail)``."""
        for i, r in enumerate(self.relations):
            a, b = self.nodes[i], self.nodes[i + 1]
            yield (b, r, a) if self.inverse[i] else (a, r, b)


@dataclass(frozen=True, slots=True)
class Subgraph(Serialisable):
    """Knowledge extracted for one question, as KG ids.

    ``edges`` are stored edges ``(head, relation, tail)``; ``question_nodes`` are the grounded question
    concepts, ``choice_nodes[i]`` those of choice ``i``; ``paths`` link question to choice concepts.
    """

    nodes: tuple[int, ...] = ()
    edges: tuple[tuple[int, int, int], ...] = ()
    question_nodes: tuple[int, ...] = ()
    choice_nodes: tuple[tuple[int, ...], ...] = ()
    paths: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class Usage(Serialisable):
    """What calls cost: tokens, calls, wall time and money (``cost`` in US dollars, or the arm's unit)."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    cached_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
            self.latency_s + other.latency_s,
            self.cost + other.cost,
            self.cached_calls + other.cached_calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @staticmethod
    def total(usages: Sequence[Usage]) -> Usage:
        out = Usage()
        for u in usages:
            out = out + u
        return out


@dataclass(frozen=True, slots=True)
class GenerationSettings:
    """How a caller asks a generating model to decode (OpenAI's request parameters of the same names);
    ``None``/empty: the arm's own setting (greedy decoding, its configured ``max_tokens``, no stop string).

    ``max_tokens``: most tokens to generate (capped by the arm's own ``max_tokens``, which bounds its cost
    before the call); ``temperature`` ≥ 0 (0: greedy) and ``top_p`` in (0, 1]: the sampling
    distribution; ``stop``: strings that end the text (not included); ``seed``: the sampler's seed (the same
    seed, prompt and settings give the same text); ``n``: answers asked for (kgwise makes one decision per
    question, so only 1). A ``ConfigError`` names a value out of range."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1

    def __post_init__(self) -> None:
        checks = (("max_tokens", self.max_tokens is None or self.max_tokens >= 1, "≥ 1"),
                  ("temperature", self.temperature is None or 0.0 <= self.temperature <= 2.0, "in [0, 2]"),
                  ("top_p", self.top_p is None or 0.0 < self.top_p <= 1.0, "in (0, 1]"),
                  ("n", self.n >= 1, "≥ 1"),
                  ("stop", len(self.stop) <= 4 and all(self.stop), "at most 4 non-empty strings"))
        for name, ok, rule in checks:
            if not ok:
                raise ConfigError(f"{name}: must be {rule}, got {getattr(self, name)!r}")

    def given(self) -> tuple[str, ...]:
        """The settings that ask for something beyond greedy decoding of the arm's defaults: the names of
        those set away from their no-op values (``temperature`` 0, ``top_p`` 1 and ``n`` 1 are no-ops)."""
        out = []
        if self.max_tokens is not None:
            out.append("max_tokens")
        if self.temperature:
            out.append("temperature")
        if self.top_p is not None and self.top_p < 1.0:
            out.append("top_p")
        if self.stop:
            out.append("stop")
        if self.seed is not None:
            out.append("seed")
        if self.n != 1:
            out.append("n")
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Answer(Serialisable):
    """What kgwise returns for a question.

    ``prediction`` is a choice label (multiple choice) or an answer name (KGQA); ``probabilities`` maps
    choice labels (or candidate names) to probabilities; ``prediction_set`` is a calibrated set (``None``
    when none was made, ``()`` when it is empty); ``knowledge`` is the rendered evidence given to the
    model; ``arm`` and ``combo`` say which model and which (extractor, format) pair answered.
    """

    question_id: str
    prediction: str
    probabilities: Mapping[str, float] = field(default_factory=dict)
    prediction_set: tuple[str, ...] | None = None
    knowledge: str = ""
    arm: str = ""
    combo: str = ""
    raw: str = ""
    usage: Usage = field(default_factory=Usage)


_NESTED.update(
    {
        ("Question", "choices"): Choice,
        ("Subgraph", "paths"): Path,
    }
)
