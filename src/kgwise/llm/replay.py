"""``Replay``: an ``LLM`` that answers with the recorded outputs of real models, so experiments re-run on
real model behaviour without paying again.

Records are any objects with the :class:`Recorded` fields; named recordings (``replay:NAME``) are
:class:`ReplaySource` values registered with :func:`register_source` by whoever reads them (the
benchmark recordings of the shared data register in :mod:`kgwise.eval.recorded`); ``replay:NAME@FILE``
reads the user's own FILE in that source's format instead of the shared data's file (another benchmark's
AoG or GPT-family output, say). A call is matched to a
record by question id (``answer``) or by the normalised question text found in the prompt (``generate``);
a miss raises ``ReplayMissError``. ``Usage`` is the recorded one (tokens, LLM calls), priced with the
price table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kgwise.config import data_dir
from kgwise.errors import ConfigError, ReplayMissError
from kgwise.grading import question_key as _key
from kgwise.llm.base import ChoiceScores, Generation, LLMError, Message, as_messages
from kgwise.llm.prices import PriceTable, default_prices
from kgwise.llm.registry import register_backend
from kgwise.types import Answer, Question, Usage

__all__ = ["SOURCES", "Recorded", "Replay", "ReplaySource", "register_source"]


class Recorded(Protocol):
    """One recorded reply: the question's id and/or text, the reply, and what it spent."""

    @property
    def qid(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def prediction(self) -> str: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def calls(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ReplaySource:
    """A named recording: ``load(data_dir)`` reads its records; ``price_model`` prices their tokens;
    ``load_file(path)``, when given, reads one file of the same format that the user points at
    (``replay:NAME@FILE``)."""

    name: str
    description: str
    load: Callable[[Path], Sequence[Recorded]]
    price_model: str | None = None
    load_file: Callable[[Path], Sequence[Recorded]] | None = None


PROMPTS_KEPT = 4096
"""Prompts whose record :meth:`Replay.lookup` remembers (all are forgotten when it is full)."""

SOURCES: dict[str, ReplaySource] = {}
"""Registered recordings by name (``replay:NAME``)."""


def register_source(source: ReplaySource) -> ReplaySource:
    """Make ``source`` available as ``replay:NAME`` (a name registered twice is an error)."""
    if source.name in SOURCES and SOURCES[source.name] is not source:
        raise ConfigError(f"replay source {source.name!r} is registered twice")
    SOURCES[source.name] = source
    return source


class Replay:
    """Recorded replies behind the ``LLM`` protocol. ``correct`` of a record is the file's own verdict
    (the GPT-family files have none: ``False`` there, score them with ``match_answer``)."""

    def __init__(self, records: Iterable[Recorded], name: str, *, price_model: str | None = None,
                 prices: PriceTable | None = None) -> None:
        self.name = name
        self.records = list(records)
        self.price_model = price_model
        self.prices = prices if prices is not None else default_prices()
        self._by_id: dict[str, Recorded] = {}
        self._by_key: dict[str, Recorded] = {}
        for r in self.records:
            if r.qid:
                self._by_id.setdefault(r.qid, r)
            if r.question:
                self._by_key.setdefault(_key(r.question), r)
        if not self._by_id and not self._by_key:
            raise ConfigError(f"replay {name!r}: no records with an id or a question")
        # longest keys first, so a prompt holding a longer question is not matched by a shorter one
        self._keys_by_len = sorted(self._by_key, key=len, reverse=True)
        # a prompt's record once found (normalising the prompt and scanning the keys for the question in
        # it takes ~0.2 ms over the 4,735 ChatGPT recordings): the recordings never change, so the same
        # prompt finds the same record
        self._by_prompt: dict[str, Recorded] = {}

    @classmethod
    def from_spec(cls, spec: str, data: str | Path | None = None) -> Replay:
        """``NAME`` of a registered :class:`ReplaySource`, read from the data directory ``data``; or
        ``NAME@FILE``: the user's FILE in that source's format."""
        name, at, file = spec.strip().partition("@")
        if name not in SOURCES:
            known = ", ".join(SOURCES) or "none (import kgwise.eval.recorded for the benchmark recordings)"
            raise ConfigError(f"unknown replay source {name!r}; registered: {known}")
        source = SOURCES[name]
        if not at:
            return cls(source.load(data_dir(data)), f"replay:{name}", price_model=source.price_model)
        if source.load_file is None:
            can = ", ".join(n for n, s in SOURCES.items() if s.load_file is not None) or "none"
            raise ConfigError(f"replay source {name!r} reads the shared data's files only; NAME@FILE works "
                              f"for {can}")
        path = Path(file)
        if not path.is_file():
            raise ConfigError(f"replay:{spec}: {path} is not a file")
        return cls(source.load_file(path), f"replay:{name}@{path.name}", price_model=source.price_model)

    def __len__(self) -> int:
        return len(self.records)

    # --- lookup ----------------------------------------------------------------------------------------

    def lookup(self, question: Question | str) -> Recorded:
        """The record of a ``Question`` (by id, then text) or of a prompt (a recorded question inside it)."""
        if isinstance(question, Question):
            rec = self._by_id.get(question.id) or self._by_key.get(_key(question.text))
            if rec is None:
                raise ReplayMissError(f"{self.name}: no recorded reply for {question.ref} "
                                      f"({question.text[:80]!r})")
            return rec
        rec = self._by_prompt.get(question)
        if rec is not None:
            return rec
        key = _key(question)
        rec = (self._by_key.get(key) or self._by_id.get(question.strip())
               or next((self._by_key[k] for k in self._keys_by_len if k and k in key), None))
        if rec is None:
            raise ReplayMissError(f"{self.name}: no recorded question found in the prompt {question[:120]!r}")
        if len(self._by_prompt) >= PROMPTS_KEPT:
            self._by_prompt.clear()
        self._by_prompt[question] = rec
        return rec

    def _usage(self, rec: Recorded, start: float) -> Usage:
        cost = None
        if self.price_model:
            cost = self.prices.cost(self.price_model, rec.input_tokens, rec.output_tokens)
        return Usage(rec.input_tokens, rec.output_tokens, rec.calls, time.perf_counter() - start, cost or 0.0)

    # --- the LLM protocol ------------------------------------------------------------------------------

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
    ) -> Generation:
        """The recorded reply to the question found in the prompt's user messages (``max_tokens``,
        ``temperature`` and ``stop`` cannot change a recording and are ignored)."""
        start = time.perf_counter()
        text = "\n".join(m.content for m in as_messages(prompt) if m.role == "user")
        rec = self.lookup(text)
        return Generation(rec.prediction, self._usage(rec, start), finish_reason="replay")

    def answer(self, question: Question) -> Answer:
        """The recorded reply to ``question`` as an ``Answer`` (matched by id, then text)."""
        start = time.perf_counter()
        rec = self.lookup(question)
        first = rec.prediction.strip().splitlines()[0] if rec.prediction.strip() else ""
        return Answer(question.id, first, raw=rec.prediction, usage=self._usage(rec, start), arm=self.name)

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        raise LLMError(f"{self.name}: recorded free-text replies have no choice log-probabilities")


register_backend("replay", Replay.from_spec, usage="replay:SOURCE")
