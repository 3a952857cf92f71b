"""``kgwise eval pipeline --live webqsp-open``: open questions through the pipeline —
WebQSP test over its Freebase fragment, live local models answering in free text (one plain, one with
the KG facts P_sub finds around the question's concepts injected), UAG's calibrated sets attached.

The pipeline part is :func:`kgwise.eval.pipeline_live.run_live` (fit on ``fit_n`` questions, every arm
on every test question, then each test question through ``Pipeline.answer`` and ``feedback`` with the
gold names): the pipeline's door takes the question text alone, so its arms ground the text (the
data set's topic entities are not given to them, at fit or test). An answer is right when it names a
gold answer (:func:`kgwise.grading.match_answer`: Hits@1 of the one answer).

Sets, two ways:

* **The pipeline's own** (``pipeline_sets``): the pipeline is configured with ``[answer_sets] uag_llm`` =
  ``generator``, so its fit calibrates UAG at the first α on the fit questions, with topic entities from
  its own grounding of the text (:mod:`kgwise.app.open_sets`), and each answer carries that set — the
  product path, measured.
* **UAG with the data set's topic entities** (``sets``), beside it at every α: a
  :class:`~kgwise.conformal.calibrated.CalibratedUAG` per α, calibrated on the fit questions' tables
  (``Φ(P)`` written live by ``generator`` through the response cache), gives each test question its set.

Either guarantee is UAG's, ``P(miss rate ≤ α) ≥ 1 − δ`` over questions like
the calibration ones, whatever arm answered (δ: the evaluation's ``delta``; LTT's fixed sequences are
the tuning front and the nested chain at δ/2 each, ``UAGConfig.order = "front+chain"``: a few dozen
tuning questions give a coarse front). An α whose calibration
certifies no λ gets no set and a note saying why (the largest set's misses and p-value, the calibration
size its miss rate needs: :func:`~kgwise.conformal.calibrated.calibration_note`). Coverage (a gold
answer in the set, as the tables grade it) and mean size are reported overall and over the questions
routed to each arm, with the generator's calls and the seconds the tables took beside the pipeline's
cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.app.arms import ArmRunner
from kgwise.app.config import ArmConfig
from kgwise.conformal.calibrated import UAG_DEFAULTS, TableSettings, calibrate_uag
from kgwise.conformal.evaluator import Generator
from kgwise.conformal.ltt import min_calibration_questions
from kgwise.conformal.tables import build_tables
from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.eval.pipeline_live import LiveMCConfig, LiveRun, coverage_stats, live_report, run_live
from kgwise.files import short_hash
from kgwise.grading import match_answer
from kgwise.kg.base import KnowledgeGraph
from kgwise.llm.local_models import DEFAULT_LLM
from kgwise.types import Question

__all__ = ["evaluate_live_open", "open_arms"]


def open_arms(llm: str = DEFAULT_LLM, combo: str = "P_sub+F_t", max_tokens: int = 16, plain: bool = True
              ) -> tuple[ArmConfig, ...]:
    """Arms costed in LLM calls, answering in free text (at most ``max_tokens``: an answer is a name):
    ``llm+kg`` with P_sub's facts rendered by ``combo``'s format, and (``plain``) ``llm`` alone."""
    kg = ArmConfig(f"{llm}+kg", "inject", "LLM", spec=llm, per_call=1.0, combo=combo, max_tokens=max_tokens)
    if not plain:
        return (kg,)
    return (ArmConfig(llm, "llm", "LLM", spec=llm, per_call=1.0, max_tokens=max_tokens), kg)


def _pipeline_sets(run: LiveRun, questions: Sequence[Question], names: Sequence[str], cfg: LiveMCConfig
                   ) -> dict[str, Any]:
    """Coverage and size of the sets the pipeline attached to its answers (at the first α), overall and
    per routed arm, with how many answers carried none and the fit's UAG calibration."""
    rows: list[tuple[str, bool, int]] = []
    without = 0
    for q in questions:
        r = run.log.get(f"pipe\t{q.id}")
        if r is None or r.get("decision") is None:
            continue
        if r.get("set") is None:
            without += 1
            continue
        rows.append((str(r["arm"]), any(match_answer(a, list(q.gold)) for a in r["set"]), len(r["set"])))
    out = coverage_stats(rows, names, cfg.alphas[0], cfg.delta)
    out["alpha"] = cfg.alphas[0]
    out["answers_without_set"] = without
    out["calibration"] = (run.fitted.get("open_sets") or {})
    return out


def _data_topic_sets(questions_fit: Sequence[Question], questions_test: Sequence[Question],
                     routed: Sequence[str | None], names: Sequence[str], kg: KnowledgeGraph,
                     generator: Generator, generator_spec: str, cfg: LiveMCConfig, out_dir: Path,
                     progress: Callable[[str], None], tune_fraction: float,
                     per_question: dict[str, dict[str, list[str]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """UAG with the data set's topic entities at every α (module docstring): the sets' figures per α and
    the tables' summary; each test question's sets go into ``per_question``."""
    t0 = time.perf_counter()
    settings = TableSettings()
    scorer = settings.scorer()
    tag = short_hash([generator_spec, getattr(generator, "max_tokens", None)])  # tables of this Φ(P)
    fit_tables = build_tables(kg, list(questions_fit), None, scorer, settings.retriever,
                              out_dir / f"uag-fit-{tag}", evaluator=settings.evaluator_config(),
                              generator=generator, say=progress)
    test_tables = build_tables(kg, list(questions_test), None, scorer, settings.retriever,
                               out_dir / f"uag-test-{tag}", evaluator=settings.evaluator_config(),
                               generator=generator, say=progress)
    seconds = time.perf_counter() - t0
    sets: dict[str, Any] = {}
    for alpha in cfg.alphas:
        uag_cfg = replace(UAG_DEFAULTS, alpha=alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=cfg.delta),
                          order="front+chain")
        uag, summary = calibrate_uag(fit_tables, uag_cfg, settings, tune_fraction, cfg.seed)
        key = f"{alpha:g}"
        if uag.abstains:
            sets[key] = {"abstains": True, "note": summary["note"], "calibration": summary}
            continue
        m = uag.evaluate(test_tables)
        covered, size = np.asarray(m["covered"], dtype=bool), np.asarray(m["size"], dtype=np.float64)
        rows = [(str(a), bool(c), int(s)) for a, c, s in zip(routed, covered, size, strict=True)]
        st = coverage_stats(rows, names, alpha, cfg.delta)
        st["note"] = summary["note"]
        st["calibration"] = summary
        sets[key] = st
        for i, q in enumerate(questions_test):
            per_question[q.id][key] = uag.answer_labels(test_tables.table(i), kg)
    return sets, {"generator": generator_spec,
                  "generator_calls": len(questions_fit) + len(questions_test), "tables_seconds": seconds,
                  "gold_reachable_fit": float(fit_tables.gold_retrievable().mean()),
                  "gold_reachable_test": float(test_tables.gold_retrievable().mean()),
                  "topic_entities": "the data set's (the pipeline's arms ground the text instead)"}


def evaluate_live_open(questions_fit: Sequence[Question], questions_test: Sequence[Question],
                       runners: Mapping[str, ArmRunner], encoder: Encoder, kg: KnowledgeGraph,
                       generator: Generator, generator_spec: str, cfg: LiveMCConfig, out_dir: Path,
                       fingerprint: Mapping[str, Any], progress: Callable[[str], None] = lambda _: None,
                       bar: Callable[[int, str], Any] | None = None, tune_fraction: float = 0.4,
                       data_topics: bool = True) -> dict[str, Any]:
    """The module docstring's protocol; ``questions_*`` carry gold names and topic entities (the
    pipeline gets neither; UAG gets the topic entities unless not ``data_topics``, which measures the
    pipeline's own sets alone)."""
    for q in [*questions_fit, *questions_test]:
        if q.choices:
            raise ConfigError(f"{q.ref}: an open-question evaluation takes questions without choices")
        if not q.gold or not q.topic_entities:
            raise ConfigError(f"{q.ref}: needs gold answer names and topic entities")
    n_cal = len(questions_fit) - round(tune_fraction * len(questions_fit))
    for alpha in cfg.alphas:
        need = min_calibration_questions(alpha, cfg.delta)
        if n_cal < need:
            raise ConfigError(f"α={alpha:g}, δ={cfg.delta:g} needs ≥ {need} UAG calibration questions; "
                              f"{len(questions_fit)} fit questions leave {n_cal} after tuning: raise the "
                              "fit size")
    bare_fit = [replace(q, topic_entities=()) for q in questions_fit]
    bare_test = [replace(q, topic_entities=()) for q in questions_test]
    cfg = replace(cfg, uag_llm=generator_spec, uag_tune_share=tune_fraction)
    run = run_live(bare_fit, bare_test, runners, encoder, kg, cfg, out_dir, fingerprint, progress, bar,
                   generator)
    report = live_report(bare_fit, bare_test, runners, cfg, run)
    report["pipeline_sets"] = _pipeline_sets(run, questions_test, list(runners), cfg)
    routed = [None if (r := run.log.get(f"pipe\t{q.id}")) is None else r["arm"] for q in questions_test]
    per_question: dict[str, dict[str, list[str]]] = {q.id: {} for q in questions_test}
    sets: dict[str, Any] = {}
    if data_topics:
        sets, report["uag"] = _data_topic_sets(questions_fit, questions_test, routed, list(runners), kg,
                                               generator, generator_spec, cfg, out_dir, progress,
                                               tune_fraction, per_question)
    report["sets"] = sets
    report["questions"] = [
        {"id": q.id, "question": q.text, "gold": list(q.gold), "arm": routed[i],
         "answer": None if (r := run.log.get(f"pipe\t{q.id}")) is None else r["prediction"],
         "correct": None if r is None else r["correct"], "pipeline_set": None if r is None else r.get("set"),
         "sets": per_question[q.id]}
        for i, q in enumerate(questions_test)]
    report["targets"]["per-arm coverage below 1 − α beyond noise"] = {
        a: [n for n, v in s["per_arm"].items() if v["n"] and v["below_target_beyond_noise"]]
        for a, s in sets.items() if "per_arm" in s}
    report["metric"] = "accuracy = Hits@1 of the pipeline's one free-text answer (match_answer)"
    return report
