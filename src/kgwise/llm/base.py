"""The ``LLM`` protocol and the values it returns: ``Message``, ``Generation``, ``ChoiceScores``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from kgwise.errors import ConfigError, InputTooLongError, ReplayMissError, ServiceError, TransientError
from kgwise.types import Serialisable, Usage

__all__ = [
    "LLM",
    "SCORING_RULES",
    "ChoiceScores",
    "ContextLengthError",
    "Generation",
    "LLMError",
    "Message",
    "ReplayMissError",
    "ScoringRule",
    "TransientLLMError",
    "UsageError",
    "as_messages",
    "gives_top_logprobs",
    "scoring_rule",
    "softmax",
    "tunable",
]


class LLMError(ServiceError):
    """A language-model call failed for good (bad reply, bad request, retries exhausted)."""


class ContextLengthError(LLMError, InputTooLongError):
    """The prompt (question, choices, knowledge) does not fit the model's context window: the request's
    fault (an HTTP client gets a 400), not the service's."""


class UsageError(LLMError):
    """A call was made and its reply reports usage that cannot be priced (missing, negative, non-finite,
    absurd): an upstream error, and the call may have cost up to its bound."""


class TransientLLMError(LLMError, TransientError):
    """A language-model failure worth retrying (HTTP 429/5xx, dropped connection, timeout, malformed
    reply); ``retry_after`` is the server's ``Retry-After`` in seconds when it sent one."""

    fatal = LLMError


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message; ``role`` is ``system``, ``user`` or ``assistant``."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in {"system", "user", "assistant"}:
            raise ValueError(f"message role must be system, user or assistant, not {self.role!r}")

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def as_messages(prompt: str | Sequence[Message]) -> tuple[Message, ...]:
    """A plain prompt becomes one user message; a message sequence is kept as is."""
    if isinstance(prompt, str):
        return (Message("user", prompt),)
    msgs = tuple(prompt)
    if not msgs:
        raise ValueError("empty message list")
    for m in msgs:
        if not isinstance(m, Message):
            raise TypeError(f"expected Message, got {type(m).__name__}")
    return msgs


@dataclass(frozen=True, slots=True)
class Generation(Serialisable):
    """Generated text and what it cost.

    ``token_logprobs`` holds the log-probability of each generated token where the backend offers it;
    ``top_logprobs[i]`` maps alternative tokens at position ``i`` to their log-probabilities;
    ``attempts`` counts the requests sent for this result (1 + retries).
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    token_logprobs: tuple[float, ...] = ()
    top_logprobs: tuple[dict[str, float], ...] = ()
    attempts: int = 1


def softmax(values: Sequence[float]) -> tuple[float, ...]:
    """Numerically stable softmax; ``-inf`` entries get probability 0."""
    if not values:
        return ()
    m = max(values)
    if m == -math.inf:
        return tuple(1.0 / len(values) for _ in values)
    exps = [math.exp(v - m) for v in values]
    z = sum(exps)
    return tuple(e / z for e in exps)


ScoringRule = Literal["sum", "mean", "pmi"]
SCORING_RULES: tuple[ScoringRule, ...] = ("sum", "mean", "pmi")
"""How scored choices are ranked: the sum of their tokens' log-probabilities, the per-token mean, or the
pointwise mutual information with the context (the sum minus the choice's log-probability under a
context-free prior; "domain-conditional PMI", Holtzman et al. 2021), which removes a small model's
preference for short, frequent answers."""


def scoring_rule(name: str) -> ScoringRule:
    """``name`` as a :data:`ScoringRule`; ``ConfigError`` when it is not one."""
    for rule in SCORING_RULES:
        if name == rule:
            return rule
    raise ConfigError(f"unknown choice-scoring rule {name!r}; use one of {', '.join(SCORING_RULES)}")


@dataclass(frozen=True, slots=True)
class ChoiceScores(Serialisable):
    """Scores of answer choices given a context.

    ``logprobs[i]`` = log P(choice_i | context), the sum over the choice's tokens; ``normalised[i]`` is the
    per-token mean of the same sum (length-normalised); ``token_counts[i]`` the number of tokens.
    ``probabilities`` is the softmax of ``logprobs`` over the choices, i.e. P(choice_i | context, one of
    the choices); :meth:`ranked_probabilities` the softmax under any of :data:`SCORING_RULES`. ``method``
    is ``logprob`` when the scores are token log-probabilities and ``letter`` when a backend without
    prompt log-probabilities fell back to asking for a letter.
    """

    logprobs: tuple[float, ...]
    normalised: tuple[float, ...]
    usage: Usage = field(default_factory=Usage)
    token_counts: tuple[int, ...] = ()
    method: str = "logprob"

    def __post_init__(self) -> None:
        if len(self.logprobs) != len(self.normalised):
            raise ValueError("logprobs and normalised must have one entry per choice")
        if self.token_counts and len(self.token_counts) != len(self.logprobs):
            raise ValueError("token_counts must have one entry per choice")

    @property
    def probabilities(self) -> tuple[float, ...]:
        return softmax(self.logprobs)

    def values(self, rule: ScoringRule = "sum", prior: ChoiceScores | None = None) -> tuple[float, ...]:
        """Each choice's ranking value under ``rule``; ``pmi`` needs ``prior``, the same choices scored
        after a context-free prompt: ``log P(c | context) − log P(c | prior context)``."""
        if rule == "sum":
            return self.logprobs
        if rule == "mean":
            return self.normalised
        if rule != "pmi":
            raise ValueError(f"unknown scoring rule {rule!r}; use one of {', '.join(SCORING_RULES)}")
        if prior is None or len(prior.logprobs) != len(self.logprobs):
            raise ValueError("pmi scoring needs the prior scores of the same choices")
        if "letter" in (self.method, prior.method):
            raise ValueError("pmi scoring needs token log-probabilities, not a letter reply's scores")
        return tuple(a - b for a, b in zip(self.logprobs, prior.logprobs, strict=True))

    def ranked_probabilities(self, rule: ScoringRule = "sum", prior: ChoiceScores | None = None
                             ) -> tuple[float, ...]:
        """The softmax of :meth:`values` over the choices."""
        return softmax(self.values(rule, prior))

    def best(self, rule: ScoringRule = "sum", prior: ChoiceScores | None = None) -> int:
        """Index of the highest-ranked choice under ``rule`` (first on ties)."""
        vals = self.values(rule, prior)
        return max(range(len(vals)), key=lambda i: (vals[i], -i))


@runtime_checkable
class LLM(Protocol):
    """A language model: generate text and score answer choices; every call reports its ``Usage``."""

    name: str

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> Generation:
        """Generate a reply to ``prompt`` (a plain string is one user message)."""
        ...

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        """Score each continuation ``choices[i]`` of ``context`` by its log-probability."""
        ...


def tunable(llm: object) -> bool:
    """Whether ``llm.generate`` also takes ``top_p``, ``seed`` and ``on_text`` (a callback given each piece
    of text as it is generated): a backend says so with the class attribute ``honours_settings = True``.
    A backend without it (a replayed recording) can only give the text it holds."""
    return getattr(llm, "honours_settings", False) is True


def gives_top_logprobs(llm: object) -> bool:
    """Whether ``llm.generate`` takes ``top_logprobs=k`` and returns the reply's first token's ``k``
    likeliest alternatives (``Generation.top_logprobs``): a backend says so with the class attribute
    ``gives_top_logprobs = True``."""
    return getattr(llm, "gives_top_logprobs", False) is True
