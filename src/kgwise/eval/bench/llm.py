"""``kgwise bench llm``: what one multiple-choice question costs on each local model, on this machine.

Per model: the load time (first use assembles and verifies a split-wheel GGUF, later ones re-read its
header), then every question answered by choice scoring under the model's own rule (:data:`LOCAL_MODELS
<kgwise.llm.local_models.LOCAL_MODELS>`, PMI: two scoring calls), timed one by one; reported as the median,
p90 and mean seconds per question, the tokens it read, its accuracy, the llama.cpp threads and the
machine's load average before and after (the machine is shared: a figure means little without its load).
For comparison, each model's question is priced as if sent to a price-table API model (same tokens).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kgwise.errors import ConfigError
from kgwise.llm.answering import answer_by_scoring
from kgwise.llm.base import ScoringRule
from kgwise.llm.local_models import LOCAL_MODELS
from kgwise.llm.prices import Price, default_prices
from kgwise.types import Question

__all__ = ["run_llm_benchmark"]


def _one_model(spec: str, questions: Sequence[Question], rule: ScoringRule, api: tuple[str, Price] | None,
               progress: Callable[[str], None]) -> dict[str, Any]:
    from kgwise.llm import get_llm

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    llm = get_llm(spec)
    load_s = time.perf_counter() - t0
    seconds: list[float] = []
    tokens: list[int] = []
    right = 0
    for i, q in enumerate(questions, start=1):
        t = time.perf_counter()
        answer, _ = answer_by_scoring(llm, q, rule=rule)
        seconds.append(time.perf_counter() - t)
        tokens.append(answer.usage.input_tokens)
        right += answer.prediction in q.gold
        if i % 10 == 0 or i == len(questions):
            progress(f"{spec}: {i}/{len(questions)} questions, median {statistics.median(seconds):.2f} s")
    out: dict[str, Any] = {
        "llm": spec, "rule": rule, "questions": len(questions), "load_s": round(load_s, 2),
        "seconds_per_question": {"median": statistics.median(seconds),
                                 "p90": float(np.percentile(seconds, 90)), "mean": statistics.fmean(seconds)},
        "input_tokens_per_question": statistics.fmean(tokens), "accuracy": right / len(questions),
        "n_params": getattr(llm, "n_params", None), "threads": getattr(llm, "n_threads", None),
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
    }
    if api is not None:
        out["api_usd_per_question"] = {api[0]: api[1].cost(round(statistics.fmean(tokens)), 0)}
    return out


def run_llm_benchmark(specs: Sequence[str], questions: Sequence[Question], *, rule: ScoringRule | None = None,
                      api_model: str | None = None,
                      progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Time ``questions`` (multiple choice, with gold answers) on every LLM of ``specs`` in turn (see the
    module docstring); ``rule``: one scoring rule for all (default: each shipped model's own, else sum)."""
    mc = [q for q in questions if q.choices and q.gold]
    if not mc:
        raise ConfigError("bench llm needs multiple-choice questions with gold answers")
    api = None if api_model is None else (api_model, default_prices().require(api_model, "--api-model"))
    models = []
    for spec in specs:
        shipped = LOCAL_MODELS.get(spec)
        chosen: ScoringRule = rule or (shipped.scoring if shipped is not None else "sum")
        models.append(_one_model(spec, mc, chosen, api, progress))
    ladder = sorted(models, key=lambda m: m["seconds_per_question"]["median"])
    return {"models": models, "ladder": [m["llm"] for m in ladder], "cpus": os.cpu_count(),
            "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "load_average": list(os.getloadavg())}
