"""``Replay``: an ``LLM`` that answers with the recorded outputs of real models, so experiments re-run on
real model behaviour without paying again.

Records (``Outcome``) come from the readers in ``kgwise.datasets.predictions``: GNN-RAG
``detailed_eval_result.jsonl`` joined with its ``predictions.jsonl``, the AoG Qwen3-max jsonl with token
counts, and the GPT-family ``idx<TAB>question<TAB>answer`` files. A call is matched to a record by question
id (``answer``) or by the normalised question text found in the prompt (``generate``); a miss raises
``ReplayMissError``. ``Usage`` is the recorded one (tokens, LLM calls), priced with the price table.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.llm.base import ChoiceScores, Generation, LLMError, Message, ReplayMissError, as_messages
from kgwise.llm.prices import PriceTable, default_prices
from kgwise.types import Answer, Question, Usage

if TYPE_CHECKING:
    from kgwise.datasets.predictions import Outcome

__all__ = ["SOURCES", "Replay"]


def _key(text: str) -> str:
    from kgwise.datasets.predictions import question_key

    return question_key(text)


SOURCES: dict[str, str] = {
    "aog-qwen3-max": "AoG agent with Qwen3-max on WebQSP test",
    "rog-rearev-sbert": "RoG (LLaMA2-7B) with ReaRev+SBERT retrieval (GNN-RAG) on WebQSP test",
    "rog-rearev-lmsr": "RoG (LLaMA2-7B) with ReaRev+LMSR retrieval (GNN-RAG) on WebQSP test",
    "llama2-chat": "plain llama2-chat-7B (no KG) on WebQSP test",
    "chatgpt": "ChatGPT (March 2023) on WebQSP", "chatgpt-feb": "ChatGPT (February 2023) on WebQSP",
    "text-davinci-003": "text-davinci-003 on WebQSP", "text-davinci-002": "text-davinci-002 on WebQSP",
    "text-davinci-001": "text-davinci-001 on WebQSP", "flan-t5-xxl": "FLAN-T5-XXL on WebQSP",
    "gpt-4": "GPT-4 on 499 WebQSP questions",
}
"""Named recordings in the shared data (``replay:NAME``)."""

_PRICE_MODEL = {
    "aog-qwen3-max": "qwen3-max", "rog-rearev-sbert": "llama-2-7b", "rog-rearev-lmsr": "llama-2-7b",
    "llama2-chat": "llama-2-7b", "chatgpt": "gpt-3.5-turbo", "chatgpt-feb": "gpt-3.5-turbo",
}


def _load_source(name: str, root: Path) -> list[Outcome]:
    from kgwise.datasets.predictions import Outcome, aog, gnn_rag, gpt_family
    from kgwise.datasets.predictions import estimate_tokens as est

    if name == "aog-qwen3-max":
        return aog.read_aog(root / aog.AOG_WEBQSP)
    if name.startswith("rog-") or name == "llama2-chat":
        if name == "llama2-chat":
            detailed = root / gnn_rag.LLAMA2_CHAT_DETAILED
            prompts: dict[str, tuple[str, str]] = {}
        else:
            variant = name[len("rog-"):]
            detailed = root / gnn_rag.ROG_GNN_DETAILED[variant]
            pred_file = root / gnn_rag.ROG_GNN_PREDICTIONS[variant]
            prompts = gnn_rag.read_prompt_texts(pred_file) if pred_file.is_file() else {}
        out = []
        for o in gnn_rag.read_detailed_eval(detailed):
            question, prompt = prompts.get(o.qid, ("", ""))
            out.append(replace(o, question=question, input_tokens=est(prompt), calls=1,
                               tokens_estimated=True))
        return out
    if name in gpt_family.GPT_FILES:
        return [Outcome("", r.question, False, r.answer, est(r.question), est(r.answer), 1, True)
                for r in gpt_family.read_answers(root / gpt_family.GPT_FILES[name])]
    raise ConfigError(f"unknown replay source {name!r}; use one of {', '.join(SOURCES)}")


class Replay:
    """Recorded replies behind the ``LLM`` protocol. ``correct`` of a record is the file's own verdict
    (the GPT-family files have none: ``False`` there, score them with ``match_answer``)."""

    def __init__(self, records: Iterable[Outcome], name: str, *, price_model: str | None = None,
                 prices: PriceTable | None = None) -> None:
        self.name = name
        self.records = list(records)
        self.price_model = price_model
        self.prices = prices if prices is not None else default_prices()
        self._by_id: dict[str, Outcome] = {}
        self._by_key: dict[str, Outcome] = {}
        for r in self.records:
            if r.qid:
                self._by_id.setdefault(r.qid, r)
            if r.question:
                self._by_key.setdefault(_key(r.question), r)
        if not self._by_id and not self._by_key:
            raise ConfigError(f"replay {name!r}: no records with an id or a question")
        # longest keys first, so a prompt holding a longer question is not matched by a shorter one
        self._keys_by_len = sorted(self._by_key, key=len, reverse=True)

    @classmethod
    def from_spec(cls, spec: str, data: str | Path | None = None) -> Replay:
        """``NAME`` of ``SOURCES`` (files under the shared data directory)."""
        name = spec.strip()
        records = _load_source(name, data_dir(data))
        return cls(records, f"replay:{name}", price_model=_PRICE_MODEL.get(name, name))

    def __len__(self) -> int:
        return len(self.records)

    # --- lookup ----------------------------------------------------------------------------------------

    def lookup(self, question: Question | str) -> Outcome:
        """The record of a ``Question`` (by id, then text) or of a prompt (a recorded question inside it)."""
        if isinstance(question, Question):
            rec = self._by_id.get(question.id) or self._by_key.get(_key(question.text))
            if rec is None:
                raise ReplayMissError(f"{self.name}: no recorded reply for {question.ref} "
                                      f"({question.text[:80]!r})")
            return rec
        key = _key(question)
        rec = self._by_key.get(key) or self._by_id.get(question.strip())
        if rec is not None:
            return rec
        for k in self._keys_by_len:
            if k and k in key:
                return self._by_key[k]
        raise ReplayMissError(f"{self.name}: no recorded question found in the prompt {question[:120]!r}")

    def _usage(self, rec: Outcome, start: float) -> Usage:
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
