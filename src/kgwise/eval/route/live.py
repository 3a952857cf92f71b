"""Live arms (Coke's "local series" setting): any ``Question → Answer`` callable as an arm, and the
collection of their outcomes into an :class:`OutcomeTable` for the same experiment.

Every live arm is called once on every question (so single-arm, random and oracle rows are exact); rows are
appended to a JSONL file as they come, and a rerun resumes. Cost unit: LLM calls (a KG model is free, as in
the paper's "calls" metric); a compute proxy (parameters × tokens, ``kgwise.llm.prices.compute_proxy``) is
recorded beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from kgwise.errors import ConfigError
from kgwise.files import ResumeLog
from kgwise.llm.base import ScoringRule
from kgwise.llm.prices import compute_proxy
from kgwise.route.arms import Cluster, score_prediction
from kgwise.route.table import OutcomeTable
from kgwise.types import Answer, Question

__all__ = ["LiveArm", "collect_outcomes", "live_arms"]


@dataclass(frozen=True)
class LiveArm:
    """An arm that answers live: anything answering ``Question → kgwise.types.Answer``
    (``KGMPredictor.answer``, ``KnowledgeInjector.answer``, ``lambda q: answer_mc(llm, q)``) under a
    ``name`` and a ``cluster``; a call costs ``per_call`` × the calls its answer reports."""

    name: str
    cluster: Cluster
    answer: Callable[[Question], Answer]
    per_call: float = 0.0
    reported_accuracy: float | None = None


def collect_outcomes(
    arms: Sequence[LiveArm],
    questions: Sequence[Question],
    path: Path | None = None,
    n_params: Mapping[str, int] | None = None,
    show_progress: bool = True,
    fingerprint: str = "",
) -> tuple[OutcomeTable, dict[str, Any]]:
    """Call every arm on every question (resuming from ``path``, a :class:`~kgwise.files.ResumeLog` of
    ``fingerprint``: what an outcome depends on beside its arm's name and question id, e.g. data set and
    split); the outcome table (cost = the arm's cost of the call) and per-arm totals (calls, tokens,
    compute proxy, seconds)."""
    if not arms or not questions:
        raise ConfigError("collect_outcomes needs at least one arm and one question")
    log = ResumeLog(path, fingerprint)
    done: dict[tuple[str, str], dict[str, Any]] = {}
    for key, row in log.items():
        arm_name, _, qid = key.partition("\t")
        done[(arm_name, qid)] = row
    params = dict(n_params or {})
    todo = [(a, q) for q in questions for a in arms if (a.name, q.id) not in done]
    for arm, q in tqdm(todo, desc="live arms", disable=not show_progress):
        result = arm.answer(q)
        u = result.usage
        row = {
            "arm": arm.name,
            "qid": q.id,
            "prediction": result.prediction,
            "correct": score_prediction(q, result.prediction),
            "cost": arm.per_call * u.calls,
            "usage": u.to_dict(),
            "compute": compute_proxy(params.get(arm.name, 0), u.total_tokens),
        }
        done[(arm.name, q.id)] = row
        log.put(f"{arm.name}\t{q.id}", row)
    correct_m = np.array([[done[(a.name, q.id)]["correct"] for a in arms] for q in questions], dtype=bool)
    cost_m = np.array([[float(done[(a.name, q.id)]["cost"]) for a in arms] for q in questions])
    totals = {
        a.name: {
            "accuracy": float(correct_m[:, j].mean()),
            "calls": int(sum(done[(a.name, q.id)]["usage"]["calls"] for q in questions)),
            "tokens": int(
                sum(
                    done[(a.name, q.id)]["usage"]["input_tokens"]
                    + done[(a.name, q.id)]["usage"]["output_tokens"]
                    for q in questions
                )
            ),
            "compute_proxy": float(sum(done[(a.name, q.id)]["compute"] for q in questions)),
            "seconds": float(sum(done[(a.name, q.id)]["usage"]["latency_s"] for q in questions)),
        }
        for j, a in enumerate(arms)
    }
    return OutcomeTable.of(questions, arms, correct_m, cost_m, "calls"), totals


def live_arms(specs: Sequence[str], open_kg: Callable[[], Any], root: Path | None, scoring: ScoringRule
              ) -> tuple[list[LiveArm], dict[str, int]]:
    """Arms from specs: ``kgm:PATH`` (a saved KG model; ``root``: the data directory its KG may need),
    ``NAME`` (a local LLM scoring the choices), ``NAME+kg`` (the same LLM with KnowGPT knowledge injection
    over the graph ``open_kg()`` returns: P_sub + triples format). LLM arms rank the choices by ``scoring``
    and are named ``SPEC/RULE``, so outcomes of another rule are not reused."""
    from kgwise.inject import InjectorConfig
    from kgwise.llm import get_llm
    from kgwise.llm.answering import METHOD_OF_RULE, MCConfig, answer_mc

    arms: list[LiveArm] = []
    params: dict[str, int] = {}
    llms: dict[str, Any] = {}
    injector_parts: dict[str, Any] = {}
    for spec in specs:
        if spec.startswith("kgm:"):
            from kgwise.kgm.predictor import KGMPredictor

            kgm = KGMPredictor.load(spec[4:], root)
            arms.append(LiveArm(f"KGM:{Path(spec[4:]).stem}", "KGM", kgm.answer))
            continue
        name, _, extra = spec.partition("+")
        if extra not in ("", "kg"):
            raise ConfigError(f"bad arm spec {spec!r}: use kgm:PATH, NAME or NAME+kg")
        llm = llms.get(name) or get_llm(name)  # no response cache: every call is real and counted
        llms[name] = llm
        params[spec] = int(getattr(llm, "n_params", 0) or 0)
        label = f"{spec}/{scoring}"
        if not extra:
            answer = partial(answer_mc, llm, config=MCConfig(method=METHOD_OF_RULE[scoring]))
            arms.append(LiveArm(label, "LLM", answer, per_call=1.0))
            continue
        if not injector_parts:
            from kgwise.extract.subgraph import SubgraphExtractor
            from kgwise.kg.grounding import Grounder
            from kgwise.render.formats import make_format

            kg = open_kg()
            injector_parts.update(
                kg=kg,
                grounder=Grounder(kg),
                extractors={"P_sub": SubgraphExtractor(kg)},
                formats={"F_t": make_format("F_t")},
            )
        from kgwise.inject import Combination, KnowledgeInjector

        injector = KnowledgeInjector(llm=llm, config=InjectorConfig(scoring), **injector_parts)
        answer = partial(injector.answer, combo=Combination("P_sub", "F_t"))
        arms.append(LiveArm(label, "LLM", answer, per_call=1.0))
    return arms, params
