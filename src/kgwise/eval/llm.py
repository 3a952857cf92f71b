"""The "w/o KG" baseline: an LLM alone on a list of questions, resumable, with accuracy and usage.

Multiple choice scores the choices (which also yields every other rule's prediction for free, reported as
``accuracy_<rule>``) or asks for a letter (``letter_from``: how many answers came from the first token's
log-probabilities, from the reply's text, from neither; ``no_letter`` names the last, counted wrong);
KGQA uses ``answer_free_text``, graded
by ``kgwise.grading.match_answer`` (Hits@1 by matching the gold names).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError
from kgwise.llm.answering import (
    METHODS,
    RULE_OF_METHOD,
    answer_free_text,
    choice_prior,
    letter_answer,
    letter_reply,
    require_logprobs,
    score_choices_after,
    scored_answer,
    scoring_context,
)
from kgwise.llm.base import LLM, SCORING_RULES
from kgwise.llm.batch import read_done, run_batch
from kgwise.route.arms import score_prediction
from kgwise.types import Question, Usage

__all__ = ["EvalConfig", "evaluate_llm"]


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """``method`` for multiple choice (one of ``kgwise.llm.answering.METHODS``); ``concurrency`` of calls
    (1 for in-process models); ``progress`` shows a bar."""

    method: str = "score"
    concurrency: int = 1
    progress: bool = True

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown answering method {self.method!r}; use {', '.join(METHODS)}")


def _answer_one(llm: LLM, q: Question, method: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"llm": llm.name, "method": method, "gold": list(q.gold)}
    if q.is_multiple_choice:
        if method == "letter":
            reply = letter_reply(llm, q)
            ans = letter_answer(q, reply, usage=reply.scores.usage, arm=llm.name)
            rec["letter_from"] = reply.source
        else:
            rule = RULE_OF_METHOD[method]
            scores = score_choices_after(llm, q, scoring_context(q))
            if rule == "pmi":
                require_logprobs(llm, scores)
            # the prior as well, so that every rule's prediction is recorded (one short call)
            prior = choice_prior(llm, q) if scores.method == "logprob" else None
            usage = scores.usage if prior is None else scores.usage + prior.usage
            ans = scored_answer(q, scores, rule, prior, usage=usage, arm=llm.name)
            labels = [c.label for c in q.choices]
            rec["logprobs"] = list(scores.logprobs)
            for r in SCORING_RULES:
                if r != "pmi" or prior is not None:
                    rec[f"pred_{r}"] = labels[scores.best(r, prior)]
            if prior is not None:
                rec["prior_logprobs"] = list(prior.logprobs)
        rec["n_choices"] = len(q.choices)
    else:
        ans = answer_free_text(llm, q)
    rec["correct"] = score_prediction(q, ans.prediction)
    rec["prediction"] = ans.prediction
    rec["probabilities"] = dict(ans.probabilities)
    rec["raw"] = ans.raw
    rec["usage"] = ans.usage.to_dict()
    return rec


def evaluate_llm(
    llm: LLM, questions: Sequence[Question], records: str | Path, config: EvalConfig | None = None
) -> dict[str, Any]:
    """Answer every question (skipping those already in ``records``, a JSONL file) and summarise.
    ``accuracy`` counts the questions with gold answers only (``None`` when none has one, e.g. CSQA's
    official test split); ``labelled`` says how many."""
    cfg = config or EvalConfig()
    path = Path(records)
    done, _ = read_done(path)
    for key, rec in done.items():
        if rec.get("llm") != llm.name or rec.get("method") != cfg.method:
            raise ConfigError(f"{path} holds results of llm={rec.get('llm')!r} method={rec.get('method')!r} "
                              f"(question {key}); use another --out file for {llm.name!r}/{cfg.method!r}")
    by_id = {q.id: q for q in questions}
    if len(by_id) != len(questions):
        raise ConfigError("question ids are not unique")
    t0 = time.perf_counter()
    rep = run_batch(((q.id, q) for q in questions), lambda q: _answer_one(llm, q, cfg.method), path,
                    concurrency=cfg.concurrency, progress=cfg.progress, desc=f"{llm.name}")
    wall = time.perf_counter() - t0
    recs = [rep.results[q.id] for q in questions if q.id in rep.results]
    n = len(questions)
    # accuracy is over the questions with gold answers; unanswered ones (failures) count as wrong
    n_gold = sum(1 for q in questions if q.gold)
    graded = [r for r in recs if r["gold"]]
    usage = Usage.total([Usage.from_dict(r["usage"]) for r in recs])
    report: dict[str, Any] = {
        "llm": llm.name,
        "method": cfg.method,
        "n": n,
        "labelled": n_gold,
        "answered": len(recs),
        "failed": len(rep.failed),
        "accuracy": sum(bool(r["correct"]) for r in graded) / n_gold if n_gold else None,
    }
    if graded and "pred_sum" in graded[0]:
        for rule in SCORING_RULES:
            if all(f"pred_{rule}" in r for r in graded):  # records of older versions lack pred_pmi
                report[f"accuracy_{rule}"] = sum(r[f"pred_{rule}"] in r["gold"] for r in graded) / n_gold
    if recs and all("letter_from" in r for r in recs):  # by letter: where each answer came from
        report["letter_from"] = dict(Counter(r["letter_from"] for r in recs))
        report["no_letter"] = [q.id for q in questions if q.id in rep.results
                               and rep.results[q.id]["letter_from"] == "none"]
    mc = [r for r in recs if "n_choices" in r]
    if mc:
        report["chance_accuracy"] = round(sum(1.0 / r["n_choices"] for r in mc) / len(mc), 6)
    model_s = sum(float(r["usage"].get("latency_s", 0.0)) for r in recs)
    report["questions_per_s"] = rep.ran / rep.wall_s if rep.ran and rep.wall_s > 0 else (
        len(recs) / model_s if model_s > 0 else 0.0)
    report["ran_now"] = rep.ran
    report["resumed"] = rep.resumed
    report["wall_s"] = wall
    report["usage"] = usage.to_dict()
    n_params = getattr(llm, "n_params", None)
    if isinstance(n_params, int):
        report["n_params"] = n_params
        report["compute_param_tokens"] = float(n_params) * usage.total_tokens
    report["tokens_per_question"] = usage.total_tokens / len(recs) if recs else 0.0
    report["records"] = str(path)
    if rep.failed:
        report["failures"] = dict(list(rep.failed.items())[:10])
    return report
