"""A UAG calibrated on a user's own KG and questions, saved to one JSON file and used to answer new ones.

``calibrate_uag`` builds the threshold-free tables of labelled questions (retrieval, ``Φ(P)`` from an LLM
or recorded answers, Eq. 6 scores), splits them into tuning and calibration parts with a seeded
permutation, fits the grid on the first and runs LTT on the second (``UAG.fit`` → ``UAG.calibrate``).
:class:`CalibratedUAG` keeps the chosen λ with what is needed to rebuild a new question's table the same
way (retriever settings, S1 metric, Eq. 6 granularity), so :meth:`CalibratedUAG.answer` returns the answer
set that carries the guarantee ``P(miss rate ≤ α) ≥ 1 − δ`` for questions like the calibration ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.conformal.evaluator import EvaluatorConfig, Generator, UQEvaluator
from kgwise.conformal.grid import EVALUATOR_SCORES, TableBatch
from kgwise.conformal.grouped import GroupedUAG
from kgwise.conformal.ltt import (
    binomial_p_values,
    calibration_questions_needed,
    min_calibration_questions,
)
from kgwise.conformal.provenance import check_same_pipeline, graph_fingerprint
from kgwise.conformal.retriever import RetrieverConfig, UQRetriever
from kgwise.conformal.scores import S1, ScoreConfig, candidate_score
from kgwise.conformal.uag import UAG, UAGConfig, config_from_dict, config_to_dict, question_table
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, write_text_atomic
from kgwise.kg.base import KnowledgeGraph
from kgwise.settings import command_default
from kgwise.types import Question

__all__ = ["UAG_DEFAULTS", "AnswerSet", "CalibratedUAG", "TableSettings", "calibrate_uag",
           "calibration_note", "labelled_questions", "reachability_advice", "sample_size_advice"]

_KIND = "kgwise.CalibratedUAG"

UAG_DEFAULTS = UAGConfig(evaluator_scores=EVALUATOR_SCORES)
"""A calibration on a user's KG: every evaluator score the tables give is in Λ."""
command_default("uag", UAG_DEFAULTS)


@dataclass(frozen=True, slots=True)
class TableSettings:
    """How a question's table is built: retriever, S1 metric (``cosine`` or ``l1``), Eq. 6 granularity."""

    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    metric: str = "cosine"
    granularity: str = "whole"

    def scorer(self, encoder: Encoder | None = None) -> S1:
        return S1(encoder, config=ScoreConfig(metric=self.metric))  # type: ignore[arg-type]

    def evaluator_config(self) -> EvaluatorConfig:
        return EvaluatorConfig(granularity=self.granularity)  # type: ignore[arg-type]

    def evaluator(self, scorer: S1, generator: Generator) -> UQEvaluator:
        return UQEvaluator(scorer, generator, self.evaluator_config())


@dataclass(frozen=True, slots=True)
class AnswerSet:
    """The calibrated set of one question (KG labels, most similar to the generation first), the generation
    it was scored against, the guarantee it carries, and the topic entities the KG does not hold (the
    retrieval starts from the others)."""

    question: str
    answers: list[str]
    generation: str
    alpha: float
    delta: float
    unknown_topic_entities: list[str]


class CalibratedUAG:
    """A calibrated :class:`UAG` plus the table settings it was calibrated with, a summary of the
    calibration (sizes, chosen λ, risks) and, optionally, its calibration questions' misses
    (:class:`~kgwise.conformal.grouped.GroupedUAG`: LTT on any group of them)."""

    def __init__(self, uag: UAG, settings: TableSettings, summary: dict[str, Any],
                 groups: GroupedUAG | None = None) -> None:
        if uag.abstains:
            raise ConfigError("CalibratedUAG needs a UAG that certified a λ")
        if uag.config.scored_step is not None:
            raise ConfigError("CalibratedUAG rebuilds tables from the KG alone: a UAG calibrated with a "
                              "scored retriever (scored_step) would lose that part")
        self.uag = uag
        self.settings = settings
        self.summary = summary
        self.groups = groups

    def generator_spec(self, llm: str | None, option: str = "--llm") -> tuple[str, bool]:
        """The LLM spec that writes Φ(P) for new questions — ``llm``, else the one the calibration used —
        and whether it is that one (the guarantee assumes so). ``ConfigError`` naming ``option`` when no
        ``llm`` is given and the calibration used recorded answers (or does not say)."""
        used = str(self.summary.get("generator", ""))
        if llm is None:
            if not used or used.startswith("recorded:"):
                raise ConfigError(f"the calibration used {used or 'an unknown generator'}: pass {option}")
            return used, True
        return llm, llm == used

    def check_pipeline(self, kg: KnowledgeGraph, llm: str | None, source: str | Path,
                       allow_mismatch: bool = False, option: str = "--allow-mismatch"
                       ) -> tuple[str, list[str]]:
        """The generator spec (see :meth:`generator_spec`) and how answering over ``kg`` with it differs
        from the calibration: another KG, or another live LLM than the one calibrated with (a calibration
        on recorded answers cannot tell, so its generator is not compared). ``ConfigError`` naming
        ``source`` unless ``allow_mismatch`` (:func:`kgwise.conformal.provenance.check_same_pipeline`)."""
        spec, _ = self.generator_spec(llm)
        made = self.summary.get("made_with")
        now = {"kg": graph_fingerprint(kg)}
        if made is None or made.get("generator") is not None:
            now["generator"] = spec
        return spec, check_same_pipeline(made, now, source, allow_mismatch, option)

    def answer(self, question: Question, kg: KnowledgeGraph, generator: Generator, scorer: S1 | None = None,
               uag: UAG | None = None) -> AnswerSet:
        """Retrieve, generate ``Φ(P)``, score and keep the candidates of the calibrated λ (``uag``'s
        instead: e.g. a group's, :meth:`GroupedUAG.certify`). A question whose topic entities are not in
        ``kg`` raises ``DataError`` (its set would always be empty)."""
        s = scorer or self.settings.scorer()
        retriever = UQRetriever(kg, s, self.settings.retriever)
        if not retriever.topic_nodes(question.topic_entities):
            raise DataError(f"{question.ref}: none of its topic entities "
                            f"{list(question.topic_entities)} is a node of the KG")
        recording = _Recording(generator)
        tab = question_table(question, retriever, self.settings.evaluator(s, recording))
        u = uag or self.uag
        unknown = [t for t in question.topic_entities if kg.find(t) is None]
        return AnswerSet(question.text, u.answer_labels(tab, kg), recording.last, u.config.alpha,
                         u.config.ltt.delta, unknown)

    # ------------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """One JSON file: the UAG config, the chosen λ and thresholds, the table settings, the summary
        (and the calibration questions' misses, with ``groups``)."""
        u = self.uag
        assert u.chosen_thresholds_ is not None and u.lambda_ is not None
        body = {
            "kind": _KIND,
            "uag": config_to_dict(u.config),
            "lambda": list(u.lambda_),
            "thresholds": [_encode(t) for t in u.chosen_thresholds_],
            "evaluator_score": u.evaluator_score_,
            **({"learned": {k: v.to_dict() for k, v in u.learned_.items()}} if u.learned_ else {}),
            "settings": {"retriever": asdict(self.settings.retriever), "metric": self.settings.metric,
                         "granularity": self.settings.granularity},
            "summary": self.summary,
            **({} if self.groups is None else {"groups": self.groups.to_dict()}),
        }
        return write_text_atomic(path, json.dumps(body, indent=1, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> CalibratedUAG:
        """A file written by :meth:`save`; ``DataError`` naming the file otherwise."""
        p = Path(path)
        body = read_json(p)
        try:
            if body.get("kind") != _KIND:
                raise ValueError(f"kind is {body.get('kind')!r}, expected {_KIND!r}")
            cfg = config_from_dict(body["uag"])
            uag = UAG(cfg)
            th = [_decode(t) for t in body["thresholds"]]
            lam = [float(x) for x in body["lambda"]]
            if len(th) != 4 or len(lam) != 4:
                raise ValueError("lambda and thresholds need four entries")
            uag.chosen_thresholds_ = (th[0], th[1], th[2], th[3])
            uag.lambda_ = (lam[0], lam[1], lam[2], lam[3])
            score = body["evaluator_score"]
            if score not in cfg.evaluator_scores:
                raise ValueError(f"evaluator score {score!r} is not among {list(cfg.evaluator_scores)}")
            uag.evaluator_score_ = score
            uag.learned_ = {k: candidate_score(k).load(v) for k, v in body.get("learned", {}).items()}
            if score not in EVALUATOR_SCORES and score not in uag.learned_:
                raise ValueError(f"evaluator score {score!r} is learned, but the file holds no fitted one")
            st = body["settings"]
            settings = TableSettings(RetrieverConfig(**st["retriever"]), str(st["metric"]),
                                     str(st["granularity"]))
            summary = dict(body.get("summary", {}))
            groups = GroupedUAG.from_dict(body["groups"]) if "groups" in body else None
        except (AttributeError, KeyError, TypeError, ValueError, ConfigError) as exc:
            raise DataError(f"not a kgwise UAG calibration file: {exc}", p) from exc
        return cls(uag, settings, summary, groups)


class _Recording:
    """A generator that remembers its last answer."""

    def __init__(self, inner: Generator) -> None:
        self.inner = inner
        self.last = ""

    def generate(self, question_id: str, prompt: str) -> str:
        self.last = self.inner.generate(question_id, prompt)
        return self.last


def _encode(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _decode(x: Any) -> float:
    if isinstance(x, str) and x in ("inf", "-inf"):
        return math.inf if x == "inf" else -math.inf
    if isinstance(x, int | float) and not isinstance(x, bool):
        return float(x)
    raise ValueError(f"bad threshold {x!r}")


def calibrate_uag(tables: TableBatch, config: UAGConfig | float, settings: TableSettings,
                  tune_fraction: float = 0.4, seed: int = 0,
                  split: tuple[Sequence[int], Sequence[int]] | None = None) -> tuple[UAG, dict[str, Any]]:
    """Fit on a seeded ``tune_fraction`` of the labelled ``tables`` — or on ``split``'s first part, given
    as question indices — and run LTT on the rest (``split``'s second part); returns the UAG (it may
    abstain: ``uag.abstains``) and a summary of the calibration. ``config``: the UAG's settings, or just α
    (then every evaluator score the tables give is in Λ); the evaluator scores the tables cannot give
    are left out of Λ."""
    cfg = config if isinstance(config, UAGConfig) else replace(UAG_DEFAULTS, alpha=config)
    if cfg.scored_step is not None:
        raise ConfigError("a UAG calibrated on a KG alone has no scored retriever: leave scored_step unset")
    n = tables.num_questions
    seeded = split is None
    if split is None:
        if not 0.0 < tune_fraction < 1.0:
            raise ConfigError(f"tune_fraction must lie in (0, 1), got {tune_fraction}")
        n_tune = round(tune_fraction * n)
        perm = np.random.default_rng(seed).permutation(n)
        split = (perm[:n_tune].tolist(), perm[n_tune:].tolist())
    tune_idx, cal_idx = (np.asarray(part, dtype=np.int64) for part in split)
    if tune_idx.size < 1 or cal_idx.size < 1:
        raise ConfigError(f"{n} labelled questions cannot be split into tuning and calibration parts "
                          f"({tune_idx.size} and {cal_idx.size})")
    if np.intersect1d(tune_idx, cal_idx).size:
        raise ConfigError("the tuning and calibration parts share questions")
    kinds = tables.usable_scores(cfg.evaluator_scores)
    if not kinds:
        raise ConfigError(f"none of the evaluator scores {list(cfg.evaluator_scores)} can be computed from "
                          "these tables (item scores need tables built with granularity items or both)")
    tune, cal = tables.subset(tune_idx), tables.subset(cal_idx)
    uag = UAG(replace(cfg, evaluator_scores=kinds))
    uag.fit(tune).calibrate(cal)
    n_cal = cal.num_questions
    largest_misses = int(n_cal - cal.gold_retrievable().sum())  # λ = (0, 0, 0): every candidate
    summary: dict[str, Any] = {
        "questions": n, "tuning": tune.num_questions, "calibration": n_cal,
        "gold_retrievable": float(tables.gold_retrievable().mean()), "alpha": cfg.alpha,
        "delta": cfg.ltt.delta,
        "seed": seed if seeded else None, "order": cfg.order, "certified": not uag.abstains,
        "valid_lambdas": int(uag.result_.valid.sum()) if uag.result_ is not None else 0,
        "largest_set_misses": largest_misses,
        "largest_set_mean_size": float(np.bincount(cal.node_q, minlength=n_cal).mean()),
        "largest_set_p_value": float(binomial_p_values([largest_misses], n_cal, cfg.alpha)[0]),
        "calibration_needed": calibration_questions_needed(cfg.alpha, cfg.ltt.delta, largest_misses / n_cal),
    }
    if not uag.abstains:
        m = uag.evaluate(cal)
        summary.update({"lambda": uag.lambda_, "evaluator_score": uag.evaluator_score_,
                        "calibration_miss_rate": float(1 - m["covered"].mean()),
                        "calibration_mean_set_size": float(m["size"].mean())})
    summary["note"] = calibration_note(summary)
    return uag, summary


def calibration_note(summary: dict[str, Any]) -> str:
    """One sentence on a :func:`calibrate_uag` summary: why no λ was certified (the largest set's misses
    and p-value against δ, the calibration size that miss rate needs), or what the chosen λ gives."""
    a, d, n = summary["alpha"], summary["delta"], summary["calibration"]
    k, p, need = summary["largest_set_misses"], summary["largest_set_p_value"], summary["calibration_needed"]
    largest = (f"the largest set (every candidate, mean size {summary['largest_set_mean_size']:.1f}) misses "
               f"{k} of {n} calibration questions, p = {p:.3g}")
    if summary["certified"]:
        miss, size = summary["calibration_miss_rate"], summary["calibration_mean_set_size"]
        return (f"certified at α={a:g}, δ={d:g}: λ={tuple(summary['lambda'])}, calibration miss rate "
                f"{miss:.3f}, mean size {size:.1f}; {largest}")
    if need is None:
        return (f"no λ certified at α={a:g}, δ={d:g}: {largest}; its miss rate {k / n:.3f} is not below α, "
                "so no calibration size can certify it (gold answers must be reachable more often)")
    if p > d:
        return (f"no λ certified at α={a:g}, δ={d:g}: {largest} > δ; at its miss rate {k / n:.3f} LTT needs "
                f"about {need} calibration questions, there are {n}")
    return (f"no λ certified at α={a:g}, δ={d:g}: {largest} ≤ δ, yet the FWER control rejected no "
            "hypothesis (Bonferroni and Holm divide δ among the grid's λ)")


def labelled_questions(questions: Sequence[Question], source: str) -> list[Question]:
    """The questions that can calibrate: gold answers and topic entities present; ``DataError`` if none."""
    out = [q for q in questions if q.gold and q.topic_entities]
    if not out:
        raise DataError("no question has both 'gold' answers and 'topic_entities'", source)
    return out


def sample_size_advice(n_calibration: int, alphas: Sequence[float], delta: float) -> list[str]:
    """Before calibrating: per α, how many calibration questions Learn-then-Test needs at ``delta``
    (:func:`~kgwise.conformal.ltt.min_calibration_questions`), and a warning for each α the
    ``n_calibration`` questions cannot certify."""
    out = []
    for a in alphas:
        need = min_calibration_questions(a, delta)
        if n_calibration < need:
            out.append(f"α={a:g}, δ={delta:g} needs at least {need} calibration questions, there are "
                       f"{n_calibration}: no λ can be certified (more questions, a larger α or a larger δ)")
        else:
            out.append(f"α={a:g}, δ={delta:g} needs at least {need} calibration questions; there are "
                       f"{n_calibration}")
    return out


def reachability_advice(gold_reachable: float, alphas: Sequence[float], retriever: RetrieverConfig
                        ) -> str | None:
    """A warning when the share of questions with a gold answer reachable in the KG (``gold_reachable``,
    :meth:`~kgwise.conformal.grid.TableBatch.gold_retrievable`) is below 1 − α for some α: no set can
    then cover enough questions; names the retrieval option that reaches more of the KG."""
    low = [a for a in alphas if gold_reachable < 1 - a]
    if not low:
        return None
    helps = []
    if retriever.direction != "both":
        helps.append("--direction both (follow edges both ways)")
    helps.append(f"--max-hops {retriever.max_hops + 1}")
    return (f"only {100 * gold_reachable:.1f} % of the questions have a gold answer reachable within "
            f"{retriever.max_hops} hops ({retriever.direction}-edges) of their topic entities, below 1 − α "
            f"for α = {', '.join(f'{a:g}' for a in low)}: those α cannot be met; try "
            + " or ".join(helps) + ", or check the topic entities and gold names against the KG's labels")
