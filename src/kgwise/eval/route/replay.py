"""WebQSP replay arms from the recorded outputs in ``$KGWISE_DATA/predictions`` (Coke's WebQSP setting).

Arms (cluster, cost):

* ``ReaRev-lmsr``, ``ReaRev-sbert`` (KGM): the ReaRev GNN's Hits@1 per question (``test.info``); a local
  model, $0 per call in API fees.
* ``RoG-GNN`` (LLM): RoG = LLaMA2-7B fine-tuned, prompted with GNN-retrieved reasoning paths (GNN-RAG,
  ReaRev-sbert retrieval); hit as recorded; tokens = the recorded prompt and answer, estimated ⌈chars/4⌉;
  priced as ``llama-2-7b``.
* ``llama2-chat`` (LLM): LLaMA2-7B-chat without retrieval; hit as recorded; input = the RoG prompt with its
  reasoning-path block removed (the same template without paths), output = its answer, ⌈chars/4⌉ each;
  priced as ``llama-2-7b``.
* ``Qwen3-max-AoG`` (LLM): the AoG agent; ``correct``, input and output tokens all recorded; ``qwen3-max``.
* ``ChatGPT`` (Mar 2023), ``text-davinci-003``, ``GPT-4`` (LLM): free-text answers scored against the gold
  names (``kgwise.grading.match_answer``); input = the bare question, output = the answer, ⌈chars/4⌉.

Files are aligned to ``kgwise.datasets.load("webqsp", "test")`` by id (GNN-RAG) or by normalised question
text (others). Questions without gold names are dropped (they cannot be scored by matching). "Reported
accuracy" (Coke's priors, Eq. 3–5) is each system's hit rate over its whole file as released.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.datasets import load
from kgwise.errors import ConfigError, DataError
from kgwise.eval.recorded import Outcome, estimate_tokens, question_key
from kgwise.eval.recorded.aog import AOG_WEBQSP, read_aog
from kgwise.eval.recorded.gnn_rag import (
    LLAMA2_CHAT_DETAILED,
    REAREV_TEST_INFO,
    ROG_GNN_DETAILED,
    read_detailed_eval,
    read_rog_predictions,
    read_test_info_candidates,
    rearev_outcomes,
)
from kgwise.eval.recorded.gpt_family import GPT_FILES, read_answers, score_answers
from kgwise.llm.prices import PriceTable, default_prices
from kgwise.route.arms import Cluster
from kgwise.route.table import OutcomeTable
from kgwise.types import Question

__all__ = [
    "MAIN_ARMS", "WEBQSP_ARMS", "ArmRecords", "candidate_stats", "load_webqsp_records", "rearev_candidates",
    "webqsp_table",
]

_ROG_VARIANT = "rearev-sbert"
_PATHS_BLOCK = re.compile(r"Reasoning Paths:\n.*?\n\n", re.DOTALL)


@dataclass(frozen=True)
class ArmRecords:
    """One replay arm's recorded outcomes, aligned to dataset ids."""

    name: str
    cluster: Cluster
    price_model: str | None
    outcomes: dict[str, Outcome]
    reported_accuracy: float
    file_rows: int
    source: str
    unmatched: tuple[str, ...] = ()
    """The file's rows that match no dataset question (their question text, else id), in file order."""


WEBQSP_ARMS = (
    "ReaRev-lmsr",
    "ReaRev-sbert",
    "RoG-GNN",
    "llama2-chat",
    "Qwen3-max-AoG",
    "ChatGPT",
    "text-davinci-003",
    "GPT-4",
)
MAIN_ARMS = WEBQSP_ARMS[:-1]


def _by_key(rows: Sequence[Outcome], keys: dict[str, str]) -> tuple[dict[str, Outcome], tuple[str, ...]]:
    """Map rows to dataset ids by question key (the first row wins when a question repeats), and the rows
    that match no question (their text, else id), counted and named in the coverage report."""
    out: dict[str, Outcome] = {}
    unmatched: list[str] = []
    for r in rows:
        qid = keys.get(r.key)
        if qid is None:
            unmatched.append(r.question or r.qid)
        elif qid not in out:
            out[qid] = r
    return out, tuple(unmatched)


def _rate(rows: Sequence[Outcome]) -> float:
    return float(np.mean([r.correct for r in rows])) if rows else 0.0


def load_webqsp_records(data: Path, questions: Sequence[Question], arms: Sequence[str]) -> list[ArmRecords]:
    """Read and align the recorded outcomes of the named arms (see the module docstring)."""
    keys = {question_key(q.text): q.id for q in questions}
    gold = {question_key(q.text): q.gold for q in questions if q.gold}
    out: list[ArmRecords] = []
    prompts: dict[str, tuple[str, str]] | None = None
    for name in arms:
        if name.startswith("ReaRev-"):
            variant = "rearev-" + name.split("-", 1)[1]
            path = data / REAREV_TEST_INFO[variant]
            rows = rearev_outcomes(path)
            aligned, missed = _by_key(rows, keys)
            out.append(ArmRecords(name, "KGM", None, aligned, _rate(rows), len(rows), str(path), missed))
        elif name in ("RoG-GNN", "llama2-chat"):
            if prompts is None:
                detailed = data / ROG_GNN_DETAILED[_ROG_VARIANT]
                prompts = {r.qid: (r.question, r.prompt)
                           for r in read_rog_predictions(detailed.with_name("predictions.jsonl"))}
            path = data / (ROG_GNN_DETAILED[_ROG_VARIANT] if name == "RoG-GNN" else LLAMA2_CHAT_DETAILED)
            rows = read_detailed_eval(path)
            aligned = {}
            ids = set(keys.values())
            missed = tuple(r.qid for r in rows if r.qid not in ids or r.qid not in prompts)
            for r in rows:
                if r.qid not in ids or r.qid not in prompts:
                    continue
                prompt = prompts[r.qid][1]
                if name == "llama2-chat":
                    prompt = _PATHS_BLOCK.sub("", prompt)
                aligned[r.qid] = Outcome(
                    r.qid,
                    prompts[r.qid][0],
                    r.correct,
                    r.prediction,
                    estimate_tokens(prompt),
                    r.output_tokens,
                    1,
                    True,
                )
            out.append(ArmRecords(name, "LLM", "llama-2-7b", aligned, _rate(rows), len(rows), str(path),
                                  missed))
        elif name == "Qwen3-max-AoG":
            path = data / AOG_WEBQSP
            rows = read_aog(path)
            aligned, missed = _by_key(rows, keys)
            out.append(ArmRecords(name, "LLM", "qwen3-max", aligned, _rate(rows), len(rows), str(path),
                                  missed))
        elif name in ("ChatGPT", "text-davinci-003", "GPT-4"):
            spec = {
                "ChatGPT": ("chatgpt", "gpt-3.5-turbo"),
                "text-davinci-003": ("text-davinci-003",) * 2,
                "GPT-4": ("gpt-4", "gpt-4"),
            }[name]
            path = data / GPT_FILES[spec[0]]
            raw = read_answers(path)
            rows = score_answers(raw, gold)  # the rows of questions with gold names
            aligned, _ = _by_key(rows, keys)
            missed = tuple(r.question for r in raw if question_key(r.question) not in keys)
            out.append(ArmRecords(name, "LLM", spec[1], aligned, _rate(rows), len(raw), str(path), missed))
        else:
            raise ConfigError(f"unknown WebQSP replay arm {name!r}; choose from {', '.join(WEBQSP_ARMS)}")
    return out


def webqsp_table(
    data: Path, arms: Sequence[str] = MAIN_ARMS, prices: PriceTable | None = None
) -> tuple[OutcomeTable, dict[str, Any]]:
    """The outcome table on the WebQSP test questions that have gold names and that every arm covers,
    with dollar costs from the price table; and a coverage report."""
    table_prices = prices or default_prices()
    questions = load("webqsp", "test", data)
    records = load_webqsp_records(data, questions, arms)
    with_gold = [q for q in questions if q.gold]
    kept = [q for q in with_gold if all(q.id in r.outcomes for r in records)]
    if not kept:
        raise DataError("no WebQSP question is covered by every arm", data)
    correct = np.zeros((len(kept), len(records)), dtype=bool)
    cost = np.zeros((len(kept), len(records)))
    for j, rec in enumerate(records):
        price = table_prices.require(rec.price_model, f"arm {rec.name!r}") if rec.price_model else None
        for i, q in enumerate(kept):
            o = rec.outcomes[q.id]
            correct[i, j] = o.correct
            cost[i, j] = price.cost(o.input_tokens, o.output_tokens) if price else 0.0
    coverage = {
        "dataset_questions": len(questions),
        "with_gold_names": len(with_gold),
        "covered_by_all_arms": len(kept),
        "no_gold_first": [q.id for q in questions if not q.gold][:20],
        "not_covered_first": [q.id for q in with_gold if q not in kept][:20],
        "arms": {
            r.name: {
                "file": r.source,
                "file_rows": r.file_rows,
                "aligned_questions": len(r.outcomes),
                "aligned_with_gold": sum(1 for q in with_gold if q.id in r.outcomes),
                "unmatched_rows": len(r.unmatched),
                "unmatched_first": list(r.unmatched[:10]),
                "reported_accuracy": round(r.reported_accuracy, 4),
                "price_model": r.price_model,
                "tokens": "recorded"
                if r.name == "Qwen3-max-AoG"
                else ("none (local)" if r.cluster == "KGM" else "estimated ceil(chars/4)"),
            }
            for r in records
        },
    }
    return OutcomeTable.of(kept, records, correct, cost, "$"), coverage


def rearev_candidates(data: Path, table: OutcomeTable, arm: str = "ReaRev-lmsr"
                      ) -> list[tuple[tuple[str, float], ...]]:
    """The ReaRev GNN's scored candidates (MID, score; best first as recorded) for every question of
    ``table`` (known before any LLM is called), aligned like :func:`load_webqsp_records` aligns its hits."""
    variant = "rearev-" + arm.split("-", 1)[1]
    path = data / REAREV_TEST_INFO[variant]
    questions = load("webqsp", "test", data)
    keys = {question_key(q.text): q.id for q in questions}
    cands: dict[str, tuple[tuple[str, float], ...]] = {}
    for row in read_test_info_candidates(path):
        qid = keys.get(question_key(row.question))
        if qid is not None and qid not in cands:
            cands[qid] = row.candidates
    missing = [q for q in table.qids if q not in cands]
    if missing:
        raise DataError(f"{len(missing)} table questions have no {arm} record (e.g. {missing[0]})", path)
    return [cands[q] for q in table.qids]


def candidate_stats(candidates: Sequence[tuple[str, float]]) -> tuple[float, float, float, float]:
    """What a scored retriever's candidate list says of its confidence: the top score, its margin over
    the second, the entropy (nats) of the scores normalised to sum 1, and ln(1 + number of candidates)
    (zeros for no candidate)."""
    if not candidates:
        return 0.0, 0.0, 0.0, 0.0
    scores = np.sort(np.asarray([max(s, 0.0) for _, s in candidates], dtype=np.float64))[::-1]
    total = float(scores.sum())
    p = scores[scores > 0] / total if total > 0 else np.ones(1)
    top = float(candidates[0][1])
    second = float(candidates[1][1]) if len(candidates) > 1 else 0.0
    return top, top - second, float(-(p * np.log(p)).sum()), float(np.log1p(len(candidates)))
