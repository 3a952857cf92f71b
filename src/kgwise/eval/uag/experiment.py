"""``kgwise eval uag``: UAG, its top-p variant, split CP and Top-K over random splits, on WebQSP or on any
labelled open questions (:func:`load_user_data`).

WebQSP (all real, from ``$KGWISE_DATA``): WebQSP test questions (gold answer names, topic entities by name),
the name-level Freebase fragment as the KG, RoG/LLaMA2-7B's recorded answers as the evaluator's generations
``Φ(P)``, and the ReaRev GNN's scored candidates for the baselines. The questions are those present in all
three (1,628). A user's data: a questions file, a KG, recorded generations (or a live LLM) and optionally a
scored retriever's candidates; without candidates the methods that need a scored retriever (``uag_gnn``,
``split_cp``, ``top_k``) are not run. Each split draws a tuning part (UAG's Eq. 1
thresholds, fixed-sequence order and λ selection), a calibration part (LTT p-values; the baselines calibrate
on tuning ∪ calibration) and a test part. Per method and α the report gives ECR (share of test questions
whose set holds a gold answer), APSS (mean set size), Hits@1 (the set's top element is gold; an empty set
misses), each as mean ± std over splits, the share of splits whose test ECR is below 1 − α
(``violation_rate``) and the share of splits where the method could certify no set (``abstain_rate``;
ECR/APSS are then averaged over the other splits and are ``null`` when every split abstained, the paper's
"-").

``violation_rate`` counts sampling noise of the test split too: a method whose true miss rate is just
under α exceeds it on about half the test splits. ``significant_violation_rate`` counts the splits whose
test misses reject "miss rate ≤ α" in a one-sided binomial test at level 0.05; where the guarantee
holds (miss rate > α with probability ≤ δ) it stays near or below δ + 0.05. ``targets`` checks the
targets per guaranteed method and α; since a covered question's set holds at least one answer,
APSS ≥ ECR ≥ 1 − α, so a paper size below 1 − α (0.5 at α = 0.45) cannot be met with the coverage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import binom

from kgwise.conformal.calibrated import reachability_advice, sample_size_advice
from kgwise.conformal.evaluator import (
    EvaluatorConfig,
    LLMGenerator,
)
from kgwise.conformal.grid import EVALUATOR_SCORES, EvaluatorScore, TableBatch
from kgwise.conformal.ltt import LTTConfig
from kgwise.conformal.retriever import RetrieverConfig
from kgwise.conformal.scores import S1, ScoreConfig
from kgwise.conformal.tables import TABLES_VERSION, build_tables
from kgwise.conformal.uag import UAG, UAGConfig
from kgwise.errors import ConfigError, DataError
from kgwise.eval.uag.baselines import CandidateBatch, SplitCPBaseline, TopKBaseline
from kgwise.files import ResumeLog, short_hash, source_fingerprint
from kgwise.kg.base import normalise_label
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.datasets.user import Candidates

__all__ = [
    "METHODS",
    "PAPER_WEBQSP",
    "SCORED_METHODS",
    "RetrieverConfig",
    "UAGData",
    "UAGExperimentConfig",
    "WebQSPData",
    "check_targets",
    "load_user_data",
    "load_webqsp_data",
    "markdown_table",
    "miss_p_value",
    "reachability_advice",
    "run_experiment",
    "sample_size_advice",
    "summarise",
    "uag_tables",
    "webqsp_tables",
    "webqsp_uag_files",
]

DEFAULT_ALPHAS = (0.1, 0.15, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5)
SIGNIFICANCE = 0.05
"""Level of the per-split binomial test behind ``significant_violation_rate``."""
METHODS = ("uag", "uag_bonferroni", "uag_top_p", "uag_eq6", "uag_learned", "uag_gnn", "split_cp", "top_k")
_UAG_METHODS: dict[str, tuple[str, tuple[EvaluatorScore, ...], bool]] = {
    # method: (FWER procedure, evaluator scores in Λ, the GNN's candidates as a scored
    # retriever)
    "uag": ("fixed_sequence", EVALUATOR_SCORES, False),
    "uag_bonferroni": ("bonferroni", EVALUATOR_SCORES, False),
    "uag_top_p": ("top_p", EVALUATOR_SCORES, False),
    "uag_eq6": ("fixed_sequence", ("absolute",), False),  # the paper's family: Eq. 6 scores only
    "uag_learned": ("fixed_sequence", (*EVALUATOR_SCORES, "learned"), False),  # + the learned score
    "uag_gnn": ("fixed_sequence", EVALUATOR_SCORES, True),  # ∪ ReaRev candidates with 1 − p ≤ t4
}
"""Tables without item-level scores (``eq6_items``) use the kinds that do not need them."""
SCORED_METHODS = ("uag_gnn", "split_cp", "top_k")
"""The methods that need a scored retriever's candidates (run only when there are some)."""
PAPER_WEBQSP: dict[str, dict[str, tuple[float, float] | None]] = {
    # Table 6 of the paper (WebQSP): ECR %, set size; None = "-" (no valid set)
    "uag": {"0.1": (92.3, 68.6), "0.15": (87.2, 39.1), "0.2": (83.1, 17.9), "0.35": (70.1, 2.6),
            "0.4": (63.1, 0.9), "0.45": (52.9, 0.5)},
    "split_cp": {"0.1": None, "0.15": None, "0.2": None, "0.35": (65.3, 4.5), "0.4": (61.6, 3.0),
                 "0.45": (50.2, 1.4)},
    "top_k": {"0.1": None, "0.15": None, "0.2": None, "0.35": (66.4, 6.2), "0.4": (61.6, 3.8),
              "0.45": (50.6, 2.0)},
}


@dataclass(frozen=True, slots=True)
class UAGExperimentConfig:
    """Split fractions (tuning, calibration; the rest is test), α values, the UAG grid and LTT settings,
    the GNN whose candidates feed the baselines and whose RoG run gave the generations."""

    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    splits: int = 20
    seed: int = 0
    tune_fraction: float = 0.2
    cal_fraction: float = 0.5
    """Half the questions certify λ: at small α, Learn-then-Test's binomial tests need calibration size
    (WebQSP, α = 0.1: mean set 37.7 with 20 % / 50 %, 64.4 with 25 % / 35 %, 20 splits each)."""
    steps: tuple[float, float, float] = (0.05, 0.05, 0.025)
    gnn_step: float = 0.01
    delta: float = 0.05
    gnn: str = "rearev-sbert"
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    metric: str = "cosine"
    granularity: str = "whole"
    limit: int | None = None
    llm: str | None = None
    methods: tuple[str, ...] = METHODS
    """The methods run (of :data:`METHODS`; those of :data:`SCORED_METHODS` only with candidates)."""

    def __post_init__(self) -> None:
        if self.splits < 1:
            raise ConfigError("splits must be ≥ 1")
        unknown = [m for m in self.methods if m not in METHODS]
        if not self.methods or unknown:
            raise ConfigError(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
        tc = (self.tune_fraction, self.cal_fraction)
        if not (tc[0] > 0 and tc[1] > 0 and tc[0] + tc[1] < 1):
            raise ConfigError("tune_fraction and cal_fraction must be positive and leave a test part")
        if not self.alphas:
            raise ConfigError("no risk level α given")
        for a in self.alphas:
            if not 0 < a < 1:
                raise ConfigError(f"alpha {a} not in (0, 1)")


@dataclass
class UAGData:
    """Aligned inputs of one experiment, in its question order: the questions, their recorded generations
    (``None``: generated live), a scored retriever's candidates (``None``: the methods of
    :data:`SCORED_METHODS` are not run) and ``single_answer`` (see :func:`with_gnn`), the KG (a graph
    spec), the paper the report compares with (``"webqsp"`` or ``None``), a tag naming the table inputs in
    cache and run keys, and what was left out (counted, the first ids named)."""

    questions: list[Question]
    generations: dict[str, str] | None
    gnn: CandidateBatch | None
    single_answer: np.ndarray | None
    kg: str
    paper: str | None = None
    tag: str = ""
    coverage: dict[str, Any] = field(default_factory=dict)
    candidates_tag: str = ""
    """Names the candidates in run keys (the tables do not depend on them)."""


WebQSPData = UAGData
"""The WebQSP inputs (:func:`load_webqsp_data`) are :class:`UAGData` with candidates and the paper set."""

_NAMED = 20
"""How many ids a coverage entry names."""


def _left(ids: Sequence[str], why: str) -> dict[str, Any]:
    return {"count": len(ids), "why": why, "first": list(ids[:_NAMED])}


def _align_webqsp(data: Path, gnn: str) -> tuple[list[tuple[Question, str, Any]], dict[str, Any]]:
    """(question, RoG generation, ReaRev ``test.info`` record) of WebQSP test ∩ RoG ∩ ``test.info`` in RoG
    order, and the coverage (what is left out, counted and named)."""
    from kgwise.datasets import load
    from kgwise.eval.recorded import question_key
    from kgwise.eval.recorded.gnn_rag import (
        REAREV_TEST_INFO,
        ROG_GNN_PREDICTIONS,
        read_rog_predictions,
        read_test_info_candidates,
    )

    if gnn not in REAREV_TEST_INFO:
        raise ConfigError(f"unknown GNN {gnn!r}; choose one of {', '.join(REAREV_TEST_INFO)}")
    questions = {q.id: q for q in load("webqsp", "test", data)}
    rog = read_rog_predictions(data / ROG_GNN_PREDICTIONS[gnn])
    info = read_test_info_candidates(data / REAREV_TEST_INFO[gnn])
    # test.info is WebQSP test in RoG order (with 11 extra questions): align monotonically by text
    aligned: list[tuple[Question, str, Any]] = []
    skipped: list[str] = []
    j = 0
    for r in rog:
        key = question_key(r.question)
        while j < len(info) and question_key(info[j].question) != key:
            skipped.append(info[j].question)
            j += 1
        if j == len(info):
            raise DataError(f"question {r.qid} ({r.question!r}) not found in order in test.info",
                            data / REAREV_TEST_INFO[gnn])
        if r.qid in questions:
            aligned.append((questions[r.qid], r.answer, info[j]))
        j += 1
    in_rog = {r.qid for r in rog}
    coverage = {
        "questions": len(questions), "aligned": len(aligned),
        "left_out": {
            "no_generation": _left([q for q in questions if q not in in_rog],
                                   "WebQSP test question without a RoG prediction"),
            "unknown_generation": _left([r.qid for r in rog if r.qid not in questions],
                                        "RoG prediction of no WebQSP test question"),
            "unaligned_candidates": _left(skipped + [c.question for c in info[j:]],
                                          "test.info question (text) of no RoG prediction"),
        },
        "kept_anyway": {"no_gold": _left([a[0].id for a in aligned if not a[0].gold],
                                         "kept: no gold answers, so a miss at every α")},
    }
    return aligned, coverage


def load_webqsp_data(data: Path, gnn: str = "rearev-sbert", limit: int | None = None) -> UAGData:
    """WebQSP test ∩ RoG generations ∩ ReaRev candidates, aligned by id and question text (the first
    ``limit`` of them when given); RoG rows of no WebQSP test question and test questions without a RoG row
    are counted in ``coverage``."""
    aligned, coverage = _align_webqsp(data, gnn)
    if limit is not None:
        aligned = aligned[:limit]
    qs = [a[0] for a in aligned]
    batch = CandidateBatch.from_lists([q.id for q in qs], [a[2].candidates for a in aligned],
                                      [a[2].answers for a in aligned])
    single = np.asarray([len(set(a[2].answers)) == 1 and len({normalise_label(g) for g in a[0].gold}) == 1
                         for a in aligned], dtype=bool)
    return UAGData(qs, {a[0].id: a[1] for a in aligned}, batch, single,
                   str(data / "webqsp" / "freebase_fragment.tsv"), "webqsp", "webqsp", coverage)


def webqsp_uag_files(data: Path, gnn: str = "rearev-sbert"
                     ) -> tuple[list[Question], dict[str, str], list[Candidates]]:
    """The inputs of ``eval uag --dataset webqsp`` in the user's formats, in the experiment's order: its
    questions, RoG's generations and ReaRev's candidates (MIDs, with the gold MIDs), so that ``eval uag
    --questions … --kg freebase_fragment.tsv --generations … --candidates …`` runs the same experiment."""
    from kgwise.datasets.user import Candidates

    aligned, _ = _align_webqsp(data, gnn)
    return ([a[0] for a in aligned], {a[0].id: a[1] for a in aligned},
            [Candidates(a[0].id, tuple(a[2].candidates), tuple(a[2].answers)) for a in aligned])


def load_user_data(questions: Path, kg: str, generations: Path | None = None, candidates: Path | None = None,
                   limit: int | None = None) -> UAGData:
    """A questions file (:func:`kgwise.datasets.user.read_questions`), a KG spec, recorded generations
    (``None``: generated live) and a scored retriever's candidates (optional), aligned by id in the
    questions file's order. A question without a generation or without candidates (when those files are
    given) is left out, and a generation or candidates record of no question is ignored; a question
    without gold answers (a miss at every α, as in WebQSP's 1,628) or without topic entities (it retrieves
    nothing) is kept. Each is counted and named in ``coverage``. A candidate is gold when its id is
    in the record's ``gold``, else when its name matches a gold name (:func:`normalise_label`)."""
    from kgwise.datasets.user import read_candidates, read_generations, read_questions
    from kgwise.kg.sources import graph_stamp

    given = read_questions(questions)
    ids = {q.id for q in given}
    gens = read_generations(generations) if generations is not None else None
    cands = read_candidates(candidates) if candidates is not None else None
    left: dict[str, dict[str, Any]] = {}
    usable = list(given)
    kept_anyway = {"no_gold": _left([q.id for q in given if not q.gold],
                                    "kept: no gold answers, so a miss at every α"),
                   "no_topic_entities": _left([q.id for q in given if not q.topic_entities],
                                              "kept: no topic entities, so nothing is retrieved")}
    if gens is not None:
        left["no_generation"] = _left([q.id for q in usable if q.id not in gens], "no recorded generation")
        left["unknown_generation"] = _left([k for k in gens if k not in ids], "generation of no question")
        usable = [q for q in usable if q.id in gens]
    if cands is not None:
        left["no_candidates"] = _left([q.id for q in usable if q.id not in cands], "no candidates record")
        left["unknown_candidates"] = _left([k for k in cands if k not in ids], "candidates of no question")
        usable = [q for q in usable if q.id in cands]
    coverage = {"questions": len(given), "aligned": len(usable),
                "left_out": {k: v for k, v in left.items() if v["count"]},
                "kept_anyway": {k: v for k, v in kept_anyway.items() if v["count"]}}
    if not usable:
        raise DataError("no question has " + " and ".join(
            (["a generation"] if gens is not None else []) + (["candidates"] if cands is not None else [])),
            questions)
    if not any(q.gold for q in usable):
        raise DataError("no question has gold answers: nothing to calibrate on", questions)
    if limit is not None:
        usable = usable[:limit]
    batch, single = None, None
    if cands is not None:
        lists, answers, singles = [], [], []
        for q in usable:
            rec = cands[q.id]
            names = {normalise_label(g) for g in q.gold}
            gold = rec.gold if rec.gold is not None else tuple(
                c for c, _ in rec.candidates if normalise_label(c) in names)
            lists.append(rec.candidates)
            answers.append(gold)
            singles.append(len(names) == 1 and (rec.gold is None or len(set(rec.gold)) == 1))
        batch = CandidateBatch.from_lists([q.id for q in usable], lists, answers)
        single = np.asarray(singles, dtype=bool)
    used = None if gens is None else {q.id: gens[q.id] for q in usable}
    tag = "own-" + short_hash({"kg": graph_stamp(kg), "generations": used,
                               "questions": [[q.id, q.text, q.gold, q.topic_entities] for q in usable]})
    cands_tag = "none" if cands is None else short_hash([cands[q.id].to_dict() for q in usable])
    return UAGData(usable, used, batch, single, kg, None, tag, coverage, cands_tag)


def uag_tables(inputs: UAGData, config: UAGExperimentConfig, tables_cache: Path | None = None,
               progress: bool = True) -> TableBatch:
    """UAG tables of the inputs' questions (built once, then read from the cache directory, a folder per
    set of inputs and table settings)."""
    from kgwise.config import cache_dir
    from kgwise.kg.sources import open_graph

    kg = open_graph(inputs.kg)
    cache = tables_cache or cache_dir() / "uag-tables" / f"{inputs.tag}-{_config_key(config)}"
    scorer = S1(config=ScoreConfig(metric=config.metric))  # type: ignore[arg-type]
    ev = EvaluatorConfig(granularity=config.granularity)  # type: ignore[arg-type]
    if config.llm is not None:  # live generations from the retrieved paths
        from kgwise.llm import get_llm

        live = LLMGenerator(get_llm(config.llm, cache=True))
        return build_tables(kg, inputs.questions, None, scorer, config.retriever, cache, progress=progress,
                            evaluator=ev, generator=live)
    if inputs.generations is None:
        raise ConfigError("no generations: give recorded ones (--generations FILE) or an LLM (--llm SPEC)")
    return build_tables(kg, inputs.questions, inputs.generations, scorer, config.retriever, cache,
                        progress=progress, evaluator=ev)


def webqsp_tables(data: Path, config: UAGExperimentConfig, wq: UAGData | None = None,
                  tables_cache: Path | None = None, progress: bool = True) -> TableBatch:
    """UAG tables of the WebQSP questions (:func:`uag_tables` of :func:`load_webqsp_data`)."""
    return uag_tables(wq or load_webqsp_data(data, config.gnn, config.limit), config, tables_cache, progress)


def _split(n: int, config: UAGExperimentConfig, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    perm = np.random.default_rng(config.seed + 1000 * s).permutation(n)
    a = round(config.tune_fraction * n)
    b = a + round(config.cal_fraction * n)
    return perm[:a], perm[a:b], perm[b:]


def _row(metrics: dict[str, np.ndarray] | None, alpha: float, extra: dict[str, Any] | None = None
         ) -> dict[str, Any]:
    if metrics is None:
        return {"alpha": alpha, "abstained": True, **(extra or {})}
    n = int(metrics["covered"].size)
    misses = int(n - metrics["covered"].sum())
    ecr = 1 - misses / n
    return {"alpha": alpha, "abstained": False, "ecr": ecr, "apss": float(metrics["size"].mean()),
            "hits1": float(metrics["hit1"].mean()), "violated": ecr < 1 - alpha,
            "significant": miss_p_value(misses, n, alpha) < SIGNIFICANCE, "test_questions": n,
            **(extra or {})}


def miss_p_value(misses: int, n: int, alpha: float) -> float:
    """One-sided binomial p-value of ``misses`` test misses out of ``n`` under H0: miss rate ≤ α,
    ``P(Binom(n, α) ≥ misses)``: small when the test split shows more misses than sampling noise explains."""
    return float(binom.sf(misses - 1, n, alpha))


def with_gnn(tables: TableBatch, gnn: CandidateBatch, single_answer: np.ndarray | None = None) -> TableBatch:
    """``tables`` plus the GNN's candidates as a scored retriever (non-conformity ``1 − p``).

    Their ids are Freebase MIDs and the fragment's nodes are names; the data map neither to the other.
    Where the identity is certain it is used: with ``single_answer`` (see :class:`WebQSPData`), the gold
    candidate of a one-answer question whose path table holds exactly one gold node *is* that node, so it
    joins it instead of becoming a second node. Every other candidate joins as a new node, so a set's size
    still counts a non-gold answer found by both parts twice (an upper bound on the deduplicated size)."""
    node_ids = None
    if single_answer is not None:
        gold_nodes = np.bincount(tables.node_q[tables.gold], minlength=tables.num_questions)
        gold_node = np.full(tables.num_questions, -1, dtype=np.int64)
        gold_node[tables.node_q[tables.gold]] = tables.node_ids[tables.gold]
        same = gnn.gold & single_answer[gnn.q] & (gold_nodes[gnn.q] == 1)
        node_ids = np.where(same, gold_node[gnn.q], -1)
    return tables.with_scored(gnn.q, 1.0 - gnn.score, gnn.gold, node_ids)


def run_split(tables: TableBatch, gnn: CandidateBatch | None, config: UAGExperimentConfig, s: int,
              gnn_tables: TableBatch | None) -> dict[str, list[dict[str, Any]]]:
    """One random split: every method at every α (``gnn_tables``: ``tables`` :func:`with_gnn`); without
    candidates (``gnn`` None) the methods of :data:`SCORED_METHODS` are not run."""
    tune, cal, test = _split(tables.num_questions, config, s)
    sources = {False: tables} if gnn_tables is None else {False: tables, True: gnn_tables}
    parts = {scored: (b.subset(tune), b.subset(cal), b.subset(test)) for scored, b in sources.items()}
    methods = tuple(m for m in config.methods if gnn is not None or m not in SCORED_METHODS)
    out: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    fits: dict[tuple[tuple[EvaluatorScore, ...], bool], tuple[UAG, np.ndarray]] = {}
    for method, (how, all_kinds, scored) in _UAG_METHODS.items():
        if method not in out:
            continue
        kinds = tables.usable_scores(all_kinds)
        tune_b, cal_b, test_b = parts[scored]
        step = config.gnn_step if scored else None
        if "learned" in kinds and not 0 < int(tune_b.gold.sum()) < tune_b.gold.size:
            why = "no set: the tuning part lacks gold or non-gold candidates to fit the learned score on"
            out[method] = [_row(None, alpha, {"why": why}) for alpha in config.alphas]
            continue
        if (kinds, scored) not in fits:
            fitted = UAG(UAGConfig(steps=config.steps, evaluator_scores=kinds, scored_step=step)).fit(tune_b)
            fits[kinds, scored] = (fitted, fitted.loss_counts(cal_b))
        fitted, losses = fits[kinds, scored]
        ltt = LTTConfig(delta=config.delta, fwer=how)  # type: ignore[arg-type]
        for alpha in config.alphas:
            uag = UAG(UAGConfig(alpha=alpha, steps=config.steps, evaluator_scores=kinds, scored_step=step,
                                ltt=ltt))
            uag.adopt_fit(fitted)
            uag.calibrate(cal_b, losses=losses)
            extra = {"lambda": uag.lambda_, "evaluator_score": uag.evaluator_score_,
                     "n_valid": int(uag.result_.valid.sum()) if uag.result_ else 0}
            out[method].append(_row(None if uag.abstains else uag.evaluate(test_b), alpha, extra))
    if gnn is None:
        return out
    base_cal = gnn.subset(np.concatenate([tune, cal]))
    base_test = gnn.subset(test)
    for alpha in config.alphas:
        if "split_cp" in out:
            cp = SplitCPBaseline().conformalize(base_cal, alpha)
            out["split_cp"].append(_row(None if cp.quantile_ is None else cp.evaluate(base_test), alpha,
                                        {"quantile": cp.quantile_}))
        if "top_k" in out:
            tk = TopKBaseline().fit(base_cal, alpha)
            out["top_k"].append(_row(None if tk.k_ is None else tk.evaluate(base_test), alpha, {"k": tk.k_}))
    return out


def summarise(per_split: Sequence[dict[str, list[dict[str, Any]]]], alphas: Sequence[float]
              ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{METHOD: {ALPHA: {ecr, ecr_std, apss, apss_std, apss_median, hits1, hits1_std, violation_rate,
    abstain_rate, splits}}}`` (``violation_rate`` counts an abstention as no violation)."""
    report: dict[str, dict[str, dict[str, Any]]] = {}
    for method in (m for m in METHODS if m in per_split[0]):
        report[method] = {}
        for i, alpha in enumerate(alphas):
            rows = [sp[method][i] for sp in per_split]
            ok = [r for r in rows if not r["abstained"]]
            entry: dict[str, Any] = {"splits": len(rows), "abstain_rate": 1 - len(ok) / len(rows)}
            for key in ("ecr", "apss", "hits1"):
                vals = np.asarray([r[key] for r in ok], dtype=np.float64)
                entry[key] = float(vals.mean()) if vals.size else None
                entry[f"{key}_std"] = float(vals.std()) if vals.size else None
                if key == "apss":  # set sizes are heavy-tailed over splits at small α
                    entry["apss_median"] = float(np.median(vals)) if vals.size else None
            entry["violation_rate"] = sum(bool(r.get("violated")) for r in rows) / len(rows)
            entry["significant_violation_rate"] = sum(bool(r.get("significant")) for r in rows) / len(rows)
            report[method][f"{alpha:g}"] = entry
    return report


GUARANTEED = ("uag", "uag_bonferroni", "uag_eq6", "uag_learned", "uag_gnn")
"""The methods that carry Learn-then-Test's guarantee (the targets are checked for them)."""


def check_targets(report: dict[str, dict[str, dict[str, Any]]], alphas: Sequence[float],
                  paper_sizes: bool = True) -> dict[str, dict[str, Any]]:
    """Per guaranteed method in ``report`` and α: ECR ≥ 1 − α; APSS ≤ the paper's WebQSP size where it
    reports one and ``paper_sizes`` (the data are WebQSP) (``paper_size_feasible``: that size is ≥ 1 − α,
    the least APSS any set with the coverage can have); APSS < split CP's at the same α where split CP ran
    and certifies a set. An entry is ``None`` where there is nothing to compare (no paper size, or no set
    in any split). ``met``: every check is true, the infeasible paper sizes left out (a method with no set
    at some α does not meet them)."""
    paper = PAPER_WEBQSP["uag"] if paper_sizes else {}
    no_cp: dict[str, Any] = {"apss": None}
    out: dict[str, dict[str, Any]] = {}
    for method in (m for m in GUARANTEED if m in report):
        rows: dict[str, Any] = {}
        for a in alphas:
            key = f"{a:g}"
            e, ref = report[method][key], paper.get(key)
            cp = report["split_cp"][key] if "split_cp" in report else no_cp
            size = e["apss"]
            rows[key] = {
                "ecr_ge_1_minus_alpha": None if e["ecr"] is None else e["ecr"] >= 1 - a,
                "paper_size": None if ref is None else ref[1],
                "paper_size_feasible": None if ref is None else ref[1] >= 1 - a,
                "size_le_paper": None if ref is None or size is None else size <= ref[1],
                "split_cp_size": cp["apss"],
                "size_lt_split_cp": None if cp["apss"] is None or size is None else size < cp["apss"],
            }
        checks = [r["ecr_ge_1_minus_alpha"] for r in rows.values()]
        checks += [r["size_le_paper"] for r in rows.values() if r["paper_size_feasible"]]
        checks += [r["size_lt_split_cp"] for r in rows.values() if r["split_cp_size"] is not None]
        out[method] = {"met": all(c is True for c in checks), "per_alpha": rows}
    return out


def _config_key(config: UAGExperimentConfig) -> str:
    return short_hash({"retriever": asdict(config.retriever), "metric": config.metric, "gnn": config.gnn,
                       **({"limit": config.limit} if config.limit is not None else {}),
                       **({"granularity": config.granularity} if config.granularity != "items" else {}),
                       **({"llm": config.llm} if config.llm is not None else {}),
                       "eq6_items": True, "tables": TABLES_VERSION})


def run_experiment(data: Path | UAGData, config: UAGExperimentConfig, out_dir: Path | None = None,
                   tables_cache: Path | None = None, progress: bool = True,
                   on_split: Callable[[int], None] | None = None, jobs: int = 1) -> dict[str, Any]:
    """Build (or reload) the tables of ``data`` (WebQSP's in a data directory, or :class:`UAGData`), run
    every split (results appended to ``out_dir/splits.jsonl``, so an interrupted run resumes) and return
    the report; the paper's rows and size targets only when the data are the paper's. ``jobs``: splits
    run at once in worker processes (joblib; −1: one per core); the results do not depend on it."""
    if jobs == 0 or jobs < -1:
        raise ConfigError(f"jobs must be ≥ 1, or −1 for one per core; got {jobs}")
    wq = data if isinstance(data, UAGData) else load_webqsp_data(data, config.gnn, config.limit)
    tables = uag_tables(wq, config, tables_cache, progress)
    gnn_tables = with_gnn(tables, wq.gnn, wq.single_answer) if wq.gnn is not None else None
    run_key = (_run_key(config) if wq.paper == "webqsp"
               else short_hash([_run_key(config), wq.tag, wq.candidates_tag]))
    log = ResumeLog(out_dir / "splits.jsonl" if out_dir is not None else None, run_key, on_other="restart")
    done = {s: r for s in range(config.splits) if (r := log.get(str(s))) is not None}
    todo = [s for s in range(config.splits) if s not in done]
    if jobs == 1:
        fresh: Iterable[dict[str, list[dict[str, Any]]]] = (
            run_split(tables, wq.gnn, config, s, gnn_tables) for s in todo)
    else:
        from joblib import Parallel, delayed

        fresh = Parallel(n_jobs=jobs, return_as="generator")(
            delayed(run_split)(tables, wq.gnn, config, s, gnn_tables) for s in todo)
    for s, result in zip(todo, fresh, strict=True):  # in split order, each logged as it arrives
        log.put(str(s), result)
        done[s] = result
        if on_split is not None:
            on_split(s)
    per_split = [done[s] for s in range(config.splits)]
    report: dict[str, Any] = summarise(per_split, config.alphas)
    report["targets"] = check_targets(report, config.alphas, paper_sizes=wq.paper == "webqsp")
    retrievable = tables.gold_retrievable()
    report["meta"] = {
        "data": wq.paper or "own",
        "coverage": wq.coverage,
        "questions": tables.num_questions,
        "gold_retrievable": float(retrievable.mean()),
        "mean_candidates_uag": float(np.bincount(tables.node_q, minlength=tables.num_questions).mean()),
        "config": {**asdict(config), "retriever": asdict(config.retriever)},
    }
    if wq.gnn is not None and gnn_tables is not None:
        report["meta"] |= {
            "gnn_gold_in_candidates": float(np.isfinite(SplitCPBaseline.calibration_scores(wq.gnn)).mean()),
            "gnn_candidates_merged": int(wq.gnn.q.size + tables.node_q.size - gnn_tables.node_q.size)}
    if wq.paper == "webqsp":
        report["meta"]["paper_table6_webqsp"] = PAPER_WEBQSP
    report["meta"]["notes"] = (
        "uag = fixed-sequence LTT (guaranteed), uag_bonferroni = Bonferroni LTT (guaranteed), "
                    "uag_top_p = the paper's uncorrected heuristic (not guaranteed), all three over Λ with "
                    "absolute and relative Eq. 6 scores against the whole generation and its items; "
                    "uag_eq6 = fixed-sequence LTT over the paper's Λ "
                    "(absolute Eq. 6 scores only); uag_learned = uag's family plus the learned "
                    "candidate score (a logistic regression fitted on each split's tuning part); "
                    "uag_gnn = uag's family with α4 for the scored retriever's "
            "(WebQSP: the ReaRev GNN's) "
                    "candidates (union of the path set and the GNN candidates with 1 − p under the α4 "
                    "quantile; sizes add both parts except a one-answer question's gold answer, known "
                    "to be the same entity in both: an upper bound, since other MIDs and names cannot be "
                    "matched); generations: "
                    + (("RoG/LLaMA2-7B answers recorded by GNN-RAG (answered from GNN-RAG's retrieved paths)"
                        if wq.paper == "webqsp" else "recorded (--generations)")
                       if config.llm is None else f"{config.llm}, live, from UAG's retrieved paths"))
    return report


def _run_key(config: UAGExperimentConfig) -> str:
    return short_hash({**asdict(config), "retriever": asdict(config.retriever),
                       "code": source_fingerprint("kgwise.conformal"),
                       "methods": {m: [how, list(kinds), scored]
                                   for m, (how, kinds, scored) in _UAG_METHODS.items()}})


def markdown_table(report: dict[str, Any], alphas: Sequence[float], paper: bool = True) -> str:
    """A Table-6-like markdown table: ECR % and set size per method of ``report`` and α (``-`` = no valid
    set); the paper's WebQSP rows only with ``paper`` (the data are WebQSP)."""
    head = "| method | " + " | ".join(f"α={a:g} ECR | α={a:g} SS" for a in alphas) + " |"
    sep = "|---|" + "---|---|" * len(alphas)
    lines = [head, sep]
    for method in (m for m in METHODS if m in report):
        cells = []
        for a in alphas:
            e = report[method][f"{a:g}"]
            if e["ecr"] is None:
                cells += ["-", "-"]
            else:
                cells += [f"{100 * e['ecr']:.1f}", f"{e['apss']:.1f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    for method, vals in (PAPER_WEBQSP if paper else {}).items():
        cells = []
        for a in alphas:
            v = vals.get(f"{a:g}", "n/a")
            if v == "n/a":
                cells += ["", ""]
            elif v is None:
                cells += ["-", "-"]
            else:
                assert isinstance(v, tuple)
                cells += [f"{v[0]:.1f}", f"{v[1]:.1f}"]
        lines.append(f"| paper {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)



