"""``kgwise eval pipeline --live obqa|csqa``: the pipeline end to end on live arms —
a trained KG model and small local LLMs with and without KnowGPT's knowledge injection — on a
multiple-choice benchmark.

Protocol (every step through :class:`kgwise.app.Pipeline`):

1. **Fit** on ``fit_n`` questions of the training split (from ``fit_offset``: a KG model trained on the
   first questions of that split must not be fitted and calibrated on them): :func:`kgwise.app.fit.
   fit_questions` runs every arm on every question (logged and resumed by the fit), warm-starts the router
   on half of them and keeps the other half as the sets' calibration, re-selected by the router at each
   answer (:mod:`kgwise.app.calibration`). The budget is set from the fit report, as a user would:
   ``budget`` × the mean cost per question on the fit log of the most accurate paid arm
   (``budget_of="best"``) or of the dearest arm (``"dearest"``) × ``test_n``, paced over the ``test_n``
   questions (a second fit with that budget re-reads the log and pays nothing).
2. **Single arms**: every arm answers every test question (the baselines the targets compare with).
3. **Pipeline**: each test question in turn through :meth:`~kgwise.app.Pipeline.answer` and
   :meth:`~kgwise.app.Pipeline.feedback` with the gold label (free arms observed, as live).

Cost is in LLM calls (the budget's unit; the KG model is free); compute is reported beside it as wall
seconds, tokens, the parameter-token proxy (:func:`kgwise.llm.prices.compute_proxy`) and US dollars at
a price-table model's token prices (``price_model``: what the same tokens would cost on that hosted
model — the local models themselves have no list price). Sets at every α of ``alphas``: the pipeline's
own set at the first α, and the same per-arm calibration scores at the others (routing does not depend
on α); coverage and mean size overall and per arm (over the test questions routed to it, with a
Clopper–Pearson interval). Every step appends to a :class:`~kgwise.files.ResumeLog` under ``out_dir``
(the pipeline's state directory there too), so a killed run resumes without calling a model twice for
a finished step; the fit's calls and the arms' test answers are keyed by each arm's own settings and do
not depend on the sizes, so a larger run in the same ``out_dir``, or one with an arm changed (a retrained
KG model), reuses the others' (its pipeline runs afresh, in its own ``run-HASH`` folder).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.app.arms import ArmOutput, ArmRunner, ObservedArm, arm_cost
from kgwise.app.calibration import arm_delta, arm_set, calibrated_threshold, choice_set
from kgwise.app.config import AnswerSetConfig, ArmConfig, Guarantee, KGConfig, PipelineConfig, RouterConfig
from kgwise.app.fit import LOG_FILE, UAG_TABLES, FitReport, call_key, fit_calls, fit_questions
from kgwise.app.pipeline import BudgetExceededError, Pipeline, seeded_ids
from kgwise.app.state import clopper_pearson
from kgwise.conformal.evaluator import Generator
from kgwise.conformal.split import min_calibration_size
from kgwise.datasets.user import ArmOutcome, GradedLog, GradedQuestion
from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.files import ResumeLog, short_hash
from kgwise.grading import match_answer
from kgwise.kg.base import KnowledgeGraph
from kgwise.llm.prices import compute_proxy, default_prices
from kgwise.progress import bar as progress_bar
from kgwise.route.coke import CokeConfig
from kgwise.types import Question, Usage

__all__ = [
    "ARMS_LOG",
    "LIVE_SPLITS",
    "LiveMCConfig",
    "LiveRun",
    "RecordedArm",
    "answer_key_of",
    "choice_signals",
    "coverage_splits",
    "coverage_stats",
    "evaluate_live_mcq",
    "grade",
    "live_graded_log",
    "live_mcq_arms",
    "live_report",
    "logged_answers",
    "question_key",
    "run_live",
    "set_at",
]

LIVE_SPLITS: dict[str, tuple[str, str]] = {"obqa": ("train", "test"), "csqa": ("ihtrain", "ihtest")}
"""(fit split, test split) per data set."""


@dataclass(frozen=True, slots=True)
class LiveMCConfig:
    """See the module docstring. ``coke``: the router's values; ``set_kind``: the split-conformal score;
    ``price_model``: the price-table model whose token prices give the dollar figure; ``uag_llm``,
    ``uag_tune_share``: the pipeline's ``[answer_sets]`` values for open questions' UAG sets."""

    fit_n: int = 300
    test_n: int = 300
    fit_offset: int = 0
    alphas: tuple[float, ...] = (0.1, 0.2)
    budget: float = 0.6
    budget_of: str = "best"
    seed: int = 0
    coke: CokeConfig = field(default_factory=CokeConfig)
    set_kind: str = "lac"
    delta: float = 0.05
    price_model: str = "llama-2-7b"
    uag_llm: str | None = None
    uag_tune_share: float = 0.4

    def fingerprint(self) -> dict[str, Any]:
        """The values as JSON (run logs are keyed by them); the UAG values only when ``uag_llm`` is set, so
        runs logged before they existed stay valid."""
        out: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        if self.uag_llm is None:
            del out["uag_llm"], out["uag_tune_share"]
        return out

    def __post_init__(self) -> None:
        if self.fit_n < 2 or self.test_n < 1:
            raise ConfigError(f"need ≥ 2 fit and ≥ 1 test questions, got {self.fit_n} and {self.test_n}")
        if self.fit_offset < 0:
            raise ConfigError(f"fit_offset must be ≥ 0, got {self.fit_offset}")
        if not self.alphas or not all(0.0 < a < 1.0 for a in self.alphas):
            raise ConfigError(f"every α must lie in (0, 1), got {list(self.alphas)}")
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ConfigError(f"budget must be a fraction > 0, got {self.budget}")
        if self.budget_of not in ("best", "dearest"):
            raise ConfigError(f"budget_of must be 'best' or 'dearest', got {self.budget_of!r}")
        if self.set_kind not in ("lac", "aps"):
            raise ConfigError(f"set_kind must be lac or aps, got {self.set_kind!r}")
        if default_prices().lookup(self.price_model) is None:
            raise ConfigError(f"price_model {self.price_model!r} is not in the price table")


ARMS_LOG = "kgwise.eval.pipeline.live.arms.v2"
"""The test answers' log (``arms.jsonl``): one row per arm and question, keyed by :func:`answer_key_of`."""


def answer_key_of(arm: ArmConfig, price_model: str) -> Callable[[Question], str]:
    """A test answer's key in the answers' log: the arm's name and fingerprint (with the price model its
    dollar figure uses) and the question, so that a run with one arm changed reuses the others' answers."""
    prefix = f"{arm.name}\t{short_hash([arm.fingerprint(), price_model])}\t"
    return lambda q: prefix + q.id


def live_mcq_arms(kgm_model: Path | None, llms: Sequence[str] = ("smollm2-135m", "gemma3-270m"),
                  scoring: str = "pmi", combo: str = "P_sub+F_t", data: Path | None = None,
                  inject: bool = True) -> tuple[ArmConfig, ...]:
    """The arms, costed in LLM calls: the KG model ``kgm`` (free, observed on every question),
    and per LLM the plain model (``NAME``) and, with ``inject``, the model with knowledge injection
    (``NAME+kg``, P_sub's subgraph rendered by ``combo``'s format; several, comma-separated: the
    combinations whose prompt bandit the fit learns), both ranking choices by ``scoring``."""
    arms: list[ArmConfig] = []
    if kgm_model is not None:
        arms.append(ArmConfig("kgm", "kgm", "KGM", model=kgm_model, data=data, observe=True))
    for spec in llms:
        arms.append(ArmConfig(spec, "llm", "LLM", spec=spec, per_call=1.0, scoring=scoring))
        if not inject:
            continue
        combos = tuple(c.strip() for c in combo.split(","))
        learnt = len(combos) > 1
        arms.append(ArmConfig(f"{spec}+kg", "inject", "LLM", spec=spec, per_call=1.0, scoring=scoring,
                              combo=None if learnt else combo, combos=combos if learnt else ()))
    return tuple(arms)


def set_at(scores: Sequence[float], kind: str, sets: AnswerSetConfig, probabilities: Mapping[str, float],
           labels: Sequence[str], arms: int = 1) -> tuple[str, ...]:
    """The set at ``sets``' α (and guarantee) from the calibration ``scores`` a decision's set was made
    from (:attr:`kgwise.app.pipeline.AnswerSetResult.calibration_scores`) — exactly as
    :meth:`kgwise.app.Pipeline.answer_set` makes it in a pipeline of ``arms`` arms."""
    return choice_set(probabilities, labels, kind, calibrated_threshold(list(scores), sets, arms))


def _n_params(runner: ArmRunner) -> int:
    inner = runner.inner if isinstance(runner, ObservedArm) else runner
    llm = getattr(inner, "llm", None)
    return int(getattr(llm, "n_params", 0) or 0)


def _usd(price_model: str, usage: Usage) -> float:
    price = default_prices().lookup(price_model)
    assert price is not None
    return float(price.cost(usage.input_tokens, usage.output_tokens))


def _pipeline_config(root: Path, arms: Sequence[ArmConfig], budget: float, cfg: LiveMCConfig,
                     alpha: float) -> PipelineConfig:
    return PipelineConfig(root / "kgwise.toml", KGConfig(), tuple(arms),
                          RouterConfig(budget, "calls", cfg.test_n, cfg.seed, True, cfg.coke),
                          AnswerSetConfig(alpha, cfg.delta, cfg.set_kind,  # type: ignore[arg-type]
                                          uag_llm=cfg.uag_llm, uag_tune_share=cfg.uag_tune_share))


def _budget(report: FitReport, cfg: LiveMCConfig) -> tuple[float, str]:
    """The router's budget from the fit report (module docstring), and the arm it was taken from."""
    arms = [a for a in report.arms if a.cost_mean is not None and a.accuracy is not None]
    paid = [a for a in arms if (a.cost_mean or 0.0) > 0]
    if not paid:
        raise ConfigError("no arm costs anything on the fit log: a budget in calls has nothing to pay for")
    if cfg.budget_of == "best":
        ref = max(paid, key=lambda a: (a.accuracy or 0.0, -(a.cost_mean or 0.0)))
    else:
        ref = max(paid, key=lambda a: a.cost_mean or 0.0)
    assert ref.cost_mean is not None
    return cfg.budget * ref.cost_mean * cfg.test_n, ref.name


def _output_row(q: Question, runner: ArmRunner, out: ArmOutput, wall: float, price_model: str
                ) -> dict[str, Any]:
    return {"prediction": out.prediction, "probabilities": out.probabilities,
            "correct": grade(q, out.prediction), "cost": arm_cost(runner.config, out.usage),
            "usage": out.usage.to_dict(), "wall_s": wall,
            "compute_proxy": compute_proxy(_n_params(runner), out.usage.total_tokens),
            "usd": _usd(price_model, out.usage) if runner.config.kind != "kgm" else 0.0}


def coverage_stats(rows: Sequence[tuple[str, bool, int]], names: Sequence[str], alpha: float,
                    delta: float) -> dict[str, Any]:
    """Coverage and mean size overall and per arm from ``(arm, covered, size)`` rows."""
    def stats(sel: Sequence[tuple[str, bool, int]]) -> dict[str, Any]:
        if not sel:
            return {"n": 0, "coverage": None, "mean_size": None}
        k = sum(c for _, c, _ in sel)
        lo, hi = clopper_pearson(k, len(sel), delta)
        return {"n": len(sel), "coverage": k / len(sel), "mean_size": float(np.mean([s for _, _, s in sel])),
                "lower": lo, "upper": hi, "below_target_beyond_noise": hi < 1 - alpha}

    return {"overall": stats(rows), "per_arm": {n: stats([r for r in rows if r[0] == n]) for n in names}}


def grade(q: Question, prediction: str | None) -> bool:
    """Whether ``prediction`` answers ``q``: the gold label (multiple choice), or a gold name by
    :func:`kgwise.grading.match_answer` (open)."""
    if prediction is None:
        return False
    return prediction in q.gold if q.choices else match_answer(prediction, list(q.gold))


def _gold(q: Question) -> str | list[str]:
    return q.gold[0] if q.choices else list(q.gold)


@dataclass
class LiveRun:
    """What :func:`run_live` leaves for a report: the results log, the arms' answers on the test
    questions, the fit report, the sets' non-conformity score (``set_kind``), the budget and the arm it
    was taken from, the router's spend, the pipeline's status and the phases' seconds."""

    log: ResumeLog
    arms_log: ResumeLog
    answer_key: dict[str, Callable[[Question], str]]
    fitted: dict[str, Any]
    set_kind: str
    budget: float
    budget_ref: str
    spent: float
    status: dict[str, Any]
    timings: dict[str, float]


def run_live(questions_fit: Sequence[Question], questions_test: Sequence[Question],
             runners: Mapping[str, ArmRunner], encoder: Encoder, kg: KnowledgeGraph | None,
             cfg: LiveMCConfig, out_dir: Path, fingerprint: Mapping[str, Any],
             progress: Callable[[str], None] = lambda _: None,
             bar: Callable[[int, str], Any] | None = None, uag_generator: Generator | None = None) -> LiveRun:
    """Steps 1–3 of the module docstring with ``runners`` (one per arm, keyed by arm name), resumable
    under ``out_dir`` for the same ``fingerprint`` (data set, arms, settings). Questions with choices
    are multiple choice, the others open (answered in free text, graded by name). ``bar(total, desc)``:
    a progress bar (an object with ``update`` and ``close``)."""
    if len(questions_fit) < 2 or not questions_test:
        raise ConfigError("need ≥ 2 fit questions and ≥ 1 test question")
    for q in [*questions_fit, *questions_test]:
        if not q.gold:
            raise ConfigError(f"{q.ref}: a live evaluation needs the gold answer of every question")
    keys = [question_key(q) for q in questions_test]
    if len(set(keys)) != len(keys):
        raise ConfigError("the test questions repeat a question (text and choices); decisions recovered "
                          "after a kill are matched by both")
    names = list(runners)
    arms = [r.config for r in runners.values()]
    alpha0 = cfg.alphas[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    arm_fp = {"kind": "kgwise.eval.pipeline.live.arms.v1", **dict(fingerprint),
              "price_model": cfg.price_model,
              "arms": [a.fingerprint() for a in arms]}
    fp = short_hash({**arm_fp, "kind": "kgwise.eval.pipeline.live.v3",
                     "config": cfg.fingerprint(),
                     "fit": [q.id for q in questions_fit], "test": [q.id for q in questions_test]})
    # arms' answers (and the fit's calls) do not depend on the sizes or on the other arms: a larger run,
    # or one with an arm changed, reuses them
    arms_log = ResumeLog(out_dir / "arms.jsonl", ARMS_LOG, fsync=True)
    answer_key = {a.name: answer_key_of(a, cfg.price_model) for a in arms}
    run_dir = out_dir / f"run-{fp}"
    run_dir.mkdir(exist_ok=True)
    log = ResumeLog(run_dir / "results.jsonl", fp, fsync=True)
    make_bar = bar or (lambda total, desc: progress_bar(total=total, desc=desc, enabled=False))
    timings: dict[str, float] = {}

    def ticking(b: Any) -> dict[str, ArmRunner]:
        return {n: ObservedArm(r, lambda _s: b.update(1)) for n, r in runners.items()}

    # 1. fit: a first fit makes the log and the report, the budget follows from it, a second fit with
    #    that budget re-reads the log (no call is made twice)
    t0 = time.perf_counter()
    probe_root = out_dir / "state-fit"
    total_fit = sum(len(fit_calls(r, q)) for q in questions_fit for r in runners.values() if r.can_answer(q))
    b = make_bar(total_fit, "fit: arms × questions")
    with Pipeline(_pipeline_config(out_dir, arms, 1.0, cfg, alpha0), probe_root, ticking(b), encoder,
                  kg, uag_generator=uag_generator) as probe:
        logged = ResumeLog(probe_root / LOG_FILE, "kgwise.fit.v1", on_other="restart")
        fps = {n: r.config.fingerprint() for n, r in runners.items()}
        b.update(sum(logged.get(call_key(fps[n], q, c)) is not None for n, r in runners.items()
                     for q in questions_fit if r.can_answer(q) for c in fit_calls(r, q)))
        spend = sum(arm_cost(r.config, r.usage_bound(q)) * len(fit_calls(r, q)) for q in questions_fit
                    for r in runners.values() if r.can_answer(q))
        probe_report = fit_questions(probe, questions_fit, max_spend=spend * 1.000001 + 1e-9,
                                     echo=progress)
    b.close()
    budget, budget_ref = _budget(probe_report, cfg)
    timings["fit_s"] = time.perf_counter() - t0
    progress(f"budget: {budget:g} calls ({cfg.budget:g} × {budget_ref}'s mean cost on the fit log × "
             f"{cfg.test_n} test questions)")
    state_root = run_dir / "state"
    config = _pipeline_config(run_dir, arms, budget, cfg, alpha0)
    pipe = Pipeline(config, state_root, runners, encoder, kg, uag_generator=uag_generator)
    try:
        fitted = log.get("fit")
        if fitted is None:
            shutil.copyfile(probe_root / LOG_FILE, state_root / LOG_FILE)
            if (probe_root / UAG_TABLES).is_dir():  # UAG's tables of the open questions: built once
                shutil.copytree(probe_root / UAG_TABLES, state_root / UAG_TABLES, dirs_exist_ok=True)
            report = fit_questions(pipe, questions_fit, max_spend=1e-9, echo=progress)
            assert report.calls_made == 0, "the second fit must re-read the first fit's log"
            fitted = report.to_dict()
            log.put("fit", fitted)

        # 2. every arm on every test question
        t0 = time.perf_counter()
        todo = [(n, q) for q in questions_test for n in names
                if runners[n].can_answer(q) and arms_log.get(answer_key[n](q)) is None]
        b = make_bar(len(todo), "single arms on the test questions")
        for n, q in todo:
            t = time.perf_counter()
            out = runners[n].answer(q)
            arms_log.put(answer_key[n](q), _output_row(q, runners[n], out, time.perf_counter() - t,
                                                     cfg.price_model))
            b.update(1)
        b.close()
        timings["single_arms_s"] = time.perf_counter() - t0

        # 3. the pipeline, one question at a time
        t0 = time.perf_counter()
        _settle_interrupted(pipe, log, {question_key(q): q for q in questions_test})
        b = make_bar(len(questions_test), "pipeline: answer + feedback")
        for q in questions_test:
            row = log.get(f"pipe\t{q.id}")
            if row is None:
                row = _ask(pipe, q, cfg)
                log.put(f"pipe\t{q.id}", row)
            if not row["settled"] and row["decision"] is not None:
                if row["decision"] in pipe.state.pending:  # else settled just before a kill
                    pipe.feedback(row["decision"], gold=_gold(q))
                row = {**row, "settled": True}
                log.put(f"pipe\t{q.id}", row)
            b.update(1)
        b.close()
        timings["pipeline_s"] = time.perf_counter() - t0
        spent = pipe.state.router.spent
        status = pipe.status().to_dict()
    finally:
        pipe.close()
    return LiveRun(log, arms_log, answer_key, fitted, config.answer_sets.kind, budget, budget_ref, spent,
                   status, timings)


def evaluate_live_mcq(questions_fit: Sequence[Question], questions_test: Sequence[Question],
                      runners: Mapping[str, ArmRunner], encoder: Encoder, kg: KnowledgeGraph | None,
                      cfg: LiveMCConfig, out_dir: Path, fingerprint: Mapping[str, Any],
                      progress: Callable[[str], None] = lambda _: None,
                      bar: Callable[[int, str], Any] | None = None) -> dict[str, Any]:
    """:func:`run_live` on multiple-choice questions, and its report (module docstring)."""
    for q in [*questions_fit, *questions_test]:
        if not q.choices:
            raise ConfigError(f"{q.ref}: a live multiple-choice evaluation needs choices")
    run = run_live(questions_fit, questions_test, runners, encoder, kg, cfg, out_dir, fingerprint,
                   progress, bar)
    report = live_report(questions_fit, questions_test, runners, cfg, run)
    report["sets"], mismatch = _mc_sets(questions_test, list(runners), cfg, run)
    report["sets_check"] = {"pipeline_set_differs_from_recomputed": mismatch}
    report["targets"]["per-arm coverage below 1 − α beyond noise"] = {
        a: [n for n, v in s["per_arm"].items() if v["n"] and v["below_target_beyond_noise"]]
        for a, s in report["sets"].items()}
    return report


def _ask(pipe: Pipeline, q: Question, cfg: LiveMCConfig) -> dict[str, Any]:
    """One question through the pipeline, as a log row (not yet settled)."""
    t = time.perf_counter()
    if not accepted(q):
        return {"decision": None, "arm": None, "prediction": None, "correct": False, "settled": True,
                "refused": "the pipeline refuses a question that gives a choice twice", "wall_s": 0.0}
    try:
        r = pipe.answer(q.text, list(q.choice_texts) if q.choices else None)
    except BudgetExceededError as exc:
        return {"decision": None, "arm": None, "prediction": None, "correct": False, "settled": True,
                "why": str(exc), "wall_s": time.perf_counter() - t}
    wall = time.perf_counter() - t
    pred = r.label if q.choices else r.answer
    return {"decision": r.decision, "arm": r.arm, "prediction": pred, "probabilities": r.probabilities,
            "correct": grade(q, pred), "answer_entities": list(r.answer_entities),
            "knowledge_triples": len(r.knowledge.triples), "cost": r.cost, "usage": r.usage.to_dict(),
            "wall_s": wall,
            "usd": _usd(cfg.price_model, r.usage) if pipe.runners[r.arm].config.kind != "kgm" else 0.0,
            "set": None if r.answer_set is None else list(r.answer_set.labels),
            "set_guarantee": None if r.answer_set is None else r.answer_set.guarantee,
            "calibration_scores": None if r.answer_set is None else list(r.answer_set.calibration_scores),
            "scores": {s.arm: s.score for s in r.scores}, "notes": list(r.notes), "settled": False}


def accepted(q: Question) -> bool:
    """Whether the pipeline's door takes ``q``: no choice given twice (case-folded), as
    :func:`kgwise.types.make_question` requires (a data set may hold such questions)."""
    folded = [c.text.strip().casefold() for c in q.choices]
    return len(set(folded)) == len(folded)


def _asked(text: str, choices: Sequence[str]) -> str:
    """What the pipeline was asked: the text and the choices (data sets repeat a text with other
    choices)."""
    return "\x1f".join([text, *choices])


def question_key(q: Question) -> str:
    """:func:`_asked` of ``q``."""
    return _asked(q.text, q.choice_texts)


def _settle_interrupted(pipe: Pipeline, log: ResumeLog, by_key: Mapping[str, Question]) -> None:
    """After a kill (the state itself calls off decisions selected but never answered): answered
    decisions the results log does not hold are settled and logged from what the state kept (no
    probabilities: such a question is left out of the set figures, and counted)."""
    state = pipe.state
    logged = {row["decision"] for key, row in log.items() if key.startswith("pipe\t")}
    for p in pipe.pending():
        if p.decision in logged:
            continue
        q = by_key.get(_asked(p.text, p.choices))
        if q is None:
            raise ConfigError(f"the state in {state.root} holds a decision on a question outside this "
                              "run's test questions; use a fresh --out-dir")
        pipe.feedback(p.decision, gold=_gold(q))
        log.put(f"pipe\t{q.id}", {"decision": p.decision, "arm": p.arm, "prediction": p.prediction,
                                   "correct": grade(q, p.prediction), "cost": p.cost, "set": p.answer_set,
                                   "recovered": True, "settled": True})


def live_report(questions_fit: Sequence[Question], questions_test: Sequence[Question],
                runners: Mapping[str, ArmRunner], cfg: LiveMCConfig, run: LiveRun) -> dict[str, Any]:
    """Per arm and pipeline accuracy, cost (calls) and compute, the pipeline's routing shares and
    spent/budget, and the target checks against the best single arm on the test questions (and,
    where the pipeline refuses some — a choice given twice —, on the questions it accepts)."""
    log = run.log
    names = list(runners)
    n = len(questions_test)
    arms: dict[str, Any] = {}
    for name in names:
        rows = [run.arms_log.get(run.answer_key[name](q)) for q in questions_test]
        got = [r for r in rows if r is not None]
        usage = Usage.total([Usage.from_dict(r["usage"]) for r in got])
        wall = float(sum(r["wall_s"] for r in got))
        arms[name] = {
            "kind": runners[name].config.kind, "answered": len(got),
            "accuracy": float(np.mean([r["correct"] for r in got])) if got else None,
            "cost_calls": float(sum(r["cost"] for r in got)), "calls": usage.calls,
            "tokens": usage.total_tokens, "compute_seconds": wall, "model_seconds": usage.latency_s,
            "compute_proxy": float(sum(r["compute_proxy"] for r in got)),
            "usd_at_price_model": float(sum(r["usd"] for r in got)),
            "seconds_per_question": wall / len(got) if got else None,
        }
    rows = [r for r in (log.get(f"pipe\t{q.id}") for q in questions_test) if r is not None]
    routed = [r["arm"] for r in rows]
    acc = float(np.mean([r["correct"] for r in rows])) if rows else 0.0
    cost = float(sum(r.get("cost", 0.0) for r in rows))
    usage = Usage.total([Usage.from_dict(r["usage"]) for r in rows if "usage" in r])
    wall = float(sum(r.get("wall_s", 0.0) for r in rows))
    spent_over = run.spent / run.budget if run.budget else None
    pipeline: dict[str, Any] = {
        "answered": sum(a is not None for a in routed), "unanswered": routed.count(None),
        "refused_by_the_pipeline": sum("refused" in r for r in rows),
        "recovered_after_kill": sum(bool(r.get("recovered")) for r in rows),
        "accuracy": acc, "cost_calls": cost, "calls": usage.calls, "tokens": usage.total_tokens,
        "compute_seconds": wall, "seconds_per_question": wall / len(rows) if rows else None,
        "usd_at_price_model": float(sum(r.get("usd", 0.0) for r in rows)),
        "budget": run.budget, "budget_from": run.budget_ref, "spent": run.spent,
        "spent_over_budget": spent_over,
        "share": {a: routed.count(a) / n for a in names},
    }
    answered = {a: v for a, v in arms.items() if v["accuracy"] is not None}
    targets: dict[str, Any] = {}
    if answered:
        best = max(answered, key=lambda a: (answered[a]["accuracy"], -answered[a]["cost_calls"]))
        dearest = max(answered, key=lambda a: answered[a]["cost_calls"])
        best_acc, best_cost = answered[best]["accuracy"], answered[best]["cost_calls"]
        targets = {
            "best_arm": best, "best_arm_accuracy": best_acc, "best_arm_cost_calls": best_cost,
            "accuracy_minus_best": acc - best_acc,
            "cost_over_best": cost / best_cost if best_cost > 0 else None,
            "accuracy >= best arm's": acc >= best_acc, "cost < best arm's": cost < best_cost,
            "both": acc >= best_acc and cost < best_cost,
            "spent/budget": spent_over,
            "underspending defect (spent < 50 % of budget while the dearest arm is more accurate)":
                (spent_over or 0.0) < 0.5 and answered[dearest]["accuracy"] > acc,
        }
        took = [q for q in questions_test if accepted(q)]
        if len(took) < n:  # the arms answered questions the pipeline refuses: compare on the same ones too
            mine = [r["correct"] for q in took if (r := log.get(f"pipe\t{q.id}")) is not None]
            same = {a: float(np.mean([r["correct"] for q in took
                                      if (r := run.arms_log.get(run.answer_key[a](q))) is not None]))
                    for a in answered}
            b = max(same, key=lambda a: (same[a], -answered[a]["cost_calls"]))
            targets["on_the_questions_the_pipeline_accepts"] = {
                "questions": len(took), "pipeline_accuracy": float(np.mean(mine)) if mine else None,
                "best_arm": b, "best_arm_accuracy": same[b],
                "accuracy >= best arm's": bool(mine) and float(np.mean(mine)) >= same[b]}
        paid = {a: v for a, v in answered.items() if v["cost_calls"] > 0}
        if paid:  # a free best arm cannot be undercut: the same checks against the best paid arm
            bp = max(paid, key=lambda a: (paid[a]["accuracy"], -paid[a]["cost_calls"]))
            targets |= {"best_paid_arm": bp, "best_paid_arm_accuracy": paid[bp]["accuracy"],
                        "best_paid_arm_cost_calls": paid[bp]["cost_calls"],
                        "accuracy >= best paid arm's": acc >= paid[bp]["accuracy"],
                        "cost < best paid arm's": cost < paid[bp]["cost_calls"],
                        "cost_over_best_paid": cost / paid[bp]["cost_calls"]}
    return {"fit_questions": len(questions_fit), "test_questions": n,
            "config": json.loads(json.dumps(asdict(cfg), default=str)), "unit": "calls",
            "arms": arms, "pipeline": pipeline, "targets": targets, "fit": run.fitted,
            "status": run.status, "timings_s": run.timings}


def _mc_sets(questions_test: Sequence[Question], names: Sequence[str], cfg: LiveMCConfig, run: LiveRun
             ) -> tuple[dict[str, Any], int]:
    """Coverage and size of the sets at every α, each from the calibration scores its decision's set was
    made from (the first α is the pipeline's own; the count of questions where the pipeline's set
    differs from the recomputed one is a check, 0 when both are the same rule)."""
    sets: dict[str, Any] = {}
    mismatch = 0
    for alpha in cfg.alphas:
        rule = AnswerSetConfig(alpha, cfg.delta, run.set_kind)  # type: ignore[arg-type]
        cov_rows: list[tuple[str, bool, int]] = []
        sizes: dict[str, list[int]] = {a: [] for a in names}
        no_set = 0
        for q in questions_test:
            r = run.log.get(f"pipe\t{q.id}")
            if r is None or r["arm"] is None or "probabilities" not in r:
                continue
            scores = r.get("calibration_scores")
            if scores is None or not r["probabilities"]:
                no_set += 1
                continue
            s = set_at(scores, run.set_kind, rule, r["probabilities"], [c.label for c in q.choices],
                       len(names))
            if alpha == cfg.alphas[0] and r["set"] is not None and list(s) != list(r["set"]):
                mismatch += 1
            cov_rows.append((r["arm"], q.gold[0] in s, len(s)))
            sizes[r["arm"]].append(len(scores))
        st = coverage_stats(cov_rows, names, alpha, cfg.delta)
        st["guarantee"] = rule.guarantee
        st["questions_without_set"] = no_set
        st["calibration_size_mean"] = {a: float(np.mean(v)) if v else 0.0 for a, v in sizes.items()}
        st["min_calibration_size"] = min_calibration_size(alpha)
        sets[f"{alpha:g}"] = st
    return sets, mismatch


@dataclass
class RecordedArm:
    """An arm runner replaying logged answers (prediction, probabilities, usage) keyed by
    :func:`_asked` of the question:
    the live arms' answers, re-asked through fresh pipelines by :func:`coverage_splits`."""

    config: ArmConfig
    rows: Mapping[str, Mapping[str, Any]]

    def can_answer(self, question: Question) -> bool:
        return question_key(question) in self.rows

    def usage_bound(self, question: Question) -> Usage:
        return Usage.from_dict(self.rows[question_key(question)]["usage"])

    def answer(self, question: Question) -> ArmOutput:
        row = self.rows[question_key(question)]
        return ArmOutput(str(row["prediction"]), dict(row["probabilities"]),
                         usage=Usage.from_dict(row["usage"]))


def logged_answers(out_dir: Path, questions: Sequence[Question], arms: Sequence[ArmConfig], price_model: str
                   ) -> dict[str, dict[str, dict[str, Any]]]:
    """Every arm's logged answer on ``questions`` (arm name → :func:`_key` → row) from a live run's fit
    log and test answers under ``out_dir``, each looked up by the arm's fingerprint (answers an arm gave
    with other settings are not taken); ``ConfigError`` naming what is missing."""
    out: dict[str, dict[str, dict[str, Any]]] = {a.name: {} for a in arms}
    fit_log = ResumeLog(out_dir / "state-fit" / LOG_FILE, "kgwise.fit.v1", on_other="refuse")
    arms_file = out_dir / "arms.jsonl"
    answers = ResumeLog(arms_file, ARMS_LOG, on_other="refuse") if arms_file.is_file() else None
    for arm in arms:
        fp, key = arm.fingerprint(), answer_key_of(arm, price_model)
        for q in questions:
            row = fit_log.get(call_key(fp, q))
            if row is not None:
                out[arm.name][question_key(q)] = {**row, "prediction": row["answer"]}
            if answers is not None and (row := answers.get(key(q))) is not None:
                out[arm.name][question_key(q)] = dict(row)
    missing = [f"{a.name}: {q.id}" for a in arms for q in questions if question_key(q) not in out[a.name]]
    if missing:
        raise ConfigError(f"{out_dir}: no logged answer for {len(missing)} arm × question pairs (e.g. "
                          f"{', '.join(missing[:3])}); finish the live run first")
    return out


def choice_signals(probabilities: Mapping[str, float]) -> tuple[float, ...]:
    """What an arm's probabilities over the choices say of its confidence: the top probability, its
    margin over the second, and the entropy (nats) of the distribution (``()`` without probabilities)."""
    p = np.sort(np.asarray(list(probabilities.values()), dtype=np.float64))[::-1]
    if p.size == 0 or not np.isfinite(p).all() or p.sum() <= 0:
        return ()
    p = p / p.sum()
    q = p[p > 0]
    return float(p[0]), float(p[0] - (p[1] if p.size > 1 else 0.0)), float(-(q * np.log(q)).sum())


def live_graded_log(out_dir: Path, questions: Sequence[Question], arms: Sequence[ArmConfig], price_model: str
                    ) -> GradedLog:
    """A live run's answers (:func:`logged_answers`) as a graded log (:mod:`kgwise.datasets.user`): per
    question every arm's answer, whether it was right, its cost (in calls), its ``probabilities`` over the
    choices and as ``signals`` its confidence (:func:`choice_signals`; the KG model's is known before any
    LLM is called, an LLM arm's once it has answered), and the question's ``gold`` choice."""
    answers = logged_answers(out_dir, questions, arms, price_model)
    out = []
    for q in questions:
        graded = {}
        for a in arms:
            row = answers[a.name][question_key(q)]
            probs = row.get("probabilities") or None
            graded[a.name] = ArmOutcome(str(row["prediction"]), bool(row["correct"]), float(row["cost"]),
                                        None, choice_signals(probs or {}), probs)
        out.append(GradedQuestion(q.id, q.text, graded, q.gold[0]))
    return GradedLog(tuple(out), tuple(a.name for a in arms))


GUARANTEES: tuple[Guarantee, ...] = ("marginal", "pac", "pac_all_arms")
"""The set rules :func:`coverage_splits` checks: the pipeline's split conformal and its PAC variants (per
arm, and for every arm at once)."""


def coverage_splits(questions: Sequence[Question], arms: Sequence[ArmConfig],
                    answers: Mapping[str, Mapping[str, Mapping[str, Any]]], encoder: Encoder,
                    cfg: LiveMCConfig, splits: int, root: Path, draw: tuple[int, int] | None = None
                    ) -> dict[str, Any]:
    """The coverage check: ``splits`` seeded random halvings of ``questions`` (fit on one half,
    test on the other; with ``draw = (fit, test)``, that many questions of each, drawn at random from all
    of them per split: a dev log of a newcomer's size, tested on more questions than it holds), each
    through a fresh :class:`~kgwise.app.Pipeline` whose arms replay the logged
    ``answers``; the pipeline's and each arm's accuracy on the test halves, in how many splits the fit
    pinned each arm (routing did not beat it); per α, the share of splits where every arm's coverage over
    the questions routed to it is ≥ 1 − α (arms that got no question are not counted), the same per arm,
    the coverage's spread, the share of splits whose coverage over all test questions is ≥ 1 − α and the
    mean set size (also per arm, over all its answers) — for the split-conformal sets and, under ``pac`` and
    ``pac_all_arms``, for their PAC variants at ``cfg.delta`` per arm and split over the arms (each
    recomputed from the calibration scores its decision's set was made from). Under
    ``fallback_all_dev`` the same figures with ``[answer_sets] fallback = "all_dev"``: a decision whose set
    fell back (``pooled``: too few routed held-out questions) recomputed from every graded dev question
    its arm answered instead of the held-out ones (:func:`kgwise.app.calibration.fallback_scores`); under
    ``calibrate_on_arm`` with ``[answer_sets] calibrate_on = "arm"``
    (:func:`kgwise.app.calibration.arm_set`), and the promise it carries checked: per arm, its coverage
    over *all* test questions (its own logged answer to each)."""
    if splits < 1 or len(questions) < 4:
        raise ConfigError("coverage_splits needs ≥ 1 split and ≥ 4 questions")
    n = len(questions)
    half, test_n = (n // 2, n - n // 2) if draw is None else draw
    if half + test_n > n:  # the sizes themselves are LiveMCConfig's to check
        raise ConfigError(f"coverage_splits: {half} fit and {test_n} test questions do not fit in {n}")
    Key = tuple[Guarantee, str, str]  # guarantee, α, the calibration (held_out, all_dev, arm)
    keys: list[Key] = [(g, f"{a:g}", h) for g in GUARANTEES for a in cfg.alphas
                       for h in ("held_out", "all_dev", "arm")]
    ok: dict[Key, list[bool]] = {k: [] for k in keys}
    per_arm: dict[Key, dict[str, list[float]]] = {k: {x.name: [] for x in arms} for k in keys}
    arm_sizes: dict[Key, dict[str, list[int]]] = {k: {x.name: [] for x in arms} for k in keys}
    overall: dict[Key, list[float]] = {k: [] for k in keys}
    every_question: dict[Key, dict[str, list[float]]] = {k: {x.name: [] for x in arms} for k in keys}
    set_size: dict[Key, list[float]] = {k: [] for k in keys}
    accuracy: list[float] = []
    arm_accuracy: dict[str, list[float]] = {a.name: [] for a in arms}
    pinned: dict[str, int] = {a.name: 0 for a in arms}
    for s in range(splits):
        perm = np.random.default_rng(cfg.seed + s).permutation(n)
        fit = [questions[i] for i in perm[:half]]
        test = [questions[i] for i in perm[half:half + test_n]]
        runners = {a.name: RecordedArm(a, answers[a.name]) for a in arms}
        paid = [a.name for a in arms
                if any(arm_cost(a, Usage.from_dict(answers[a.name][question_key(q)]["usage"])) > 0
                       for q in fit)]
        if not paid:
            raise ConfigError("no arm costs anything on the logged answers")
        acc = {a: np.mean([grade(q, answers[a][question_key(q)]["prediction"]) for q in fit]) for a in paid}
        ref = max(paid, key=lambda a: acc[a])
        mean_cost = np.mean([arm_cost(runners[ref].config,
                                      Usage.from_dict(answers[ref][question_key(q)]["usage"]))
                             for q in fit])
        budget = cfg.budget * float(mean_cost) * len(test)
        split_cfg = replace(cfg, test_n=len(test), uag_llm=None)  # multiple choice: no UAG
        pipe = Pipeline(_pipeline_config(root, arms, budget, split_cfg, cfg.alphas[0]), root / f"split-{s}",
                        runners, encoder, ids=seeded_ids(cfg.seed + s))
        rows: list[tuple[Question, str, dict[str, float], tuple[float, ...], tuple[float, ...]]] = []
        right = 0
        try:
            total = sum(arm_cost(a, Usage.from_dict(answers[a.name][question_key(q)]["usage"])) for a in arms
                        for q in fit)
            report = fit_questions(pipe, fit, max_spend=total + 1.0, echo=lambda _: None)
            split_cal = pipe.state.calibration
            dev_of = ({n: tuple(split_cal.dev_scores(n).tolist()) for n in split_cal.names}
                      if split_cal is not None else {})  # an arm's every graded dev score
            if report.router_selection is not None and report.router_selection.pinned is not None:
                pinned[report.router_selection.pinned] += 1
            for q in test:
                if not accepted(q):
                    continue
                try:
                    r = pipe.answer(q.text, list(q.choice_texts))
                except BudgetExceededError:
                    continue
                pipe.feedback(r.decision, gold=q.gold[0])
                right += grade(q, r.label)
                if r.answer_set is not None:
                    dev = dev_of[r.arm] if r.answer_set.pooled else r.answer_set.calibration_scores
                    rows.append((q, r.arm, dict(r.probabilities), r.answer_set.calibration_scores, dev))
            kind = pipe.config.answer_sets.kind
        finally:
            pipe.close()
        accuracy.append(right / len(test))
        for a in arms:
            arm_accuracy[a.name].append(float(np.mean(
                [grade(q, answers[a.name][question_key(q)]["prediction"]) for q in test])))
        for key in keys:
            alpha = float(key[1])
            rule = AnswerSetConfig(alpha, cfg.delta, kind, key[0])
            got: dict[str, list[bool]] = {}
            sizes: list[int] = []
            for q, arm, probs, scores, dev in rows:
                labels = [c.label for c in q.choices]
                if key[2] == "arm":
                    assert split_cal is not None  # a decision with a set had one
                    st = arm_set(split_cal, arm, probs, labels, q.text, rule, len(arms)).labels
                else:
                    st = set_at(dev if key[2] == "all_dev" else scores, kind, rule, probs, labels, len(arms))
                got.setdefault(arm, []).append(q.gold[0] in st)
                sizes.append(len(st))
                arm_sizes[key][arm].append(len(st))
            set_size[key].append(float(np.mean(sizes)) if sizes else math.nan)
            for arm, hits in got.items():
                per_arm[key][arm].append(float(np.mean(hits)))
            overall[key].append(float(np.mean([h for v in got.values() for h in v])) if got else math.nan)
            ok[key].append(all(np.mean(h) >= 1 - alpha for h in got.values()))
            if key[2] == "arm" and split_cal is not None:  # its promise: each arm over all test questions
                for a in arms:
                    if split_cal.size(a.name):
                        every_question[key][a.name].append(float(np.mean([q.gold[0] in arm_set(
                            split_cal, a.name, answers[a.name][question_key(q)]["probabilities"] or {},
                            [c.label for c in q.choices], q.text, rule, len(arms)).labels
                            for q in test if accepted(q)])))
    def summary(g: str, rule: str = "held_out") -> dict[str, Any]:
        mine = [k for k in keys if k[0] == g and k[2] == rule]
        promise = {"per_arm_all_test_questions": {k[1]: {a: {
            "covered_share": float(np.mean([c >= 1 - float(k[1]) for c in v])),
            "coverage_mean": float(np.mean(v))} for a, v in every_question[k].items() if v}
            for k in mine}} if rule == "arm" else {}
        return {**promise,
            "every_arm_covered_share": {k[1]: float(np.mean(ok[k])) for k in mine},
            "target (≥ 95 % of splits)": {k[1]: float(np.mean(ok[k])) >= 0.95 for k in mine},
            "overall_coverage_mean": {k[1]: float(np.nanmean(overall[k])) for k in mine},
            "overall_covered_share": {k[1]: float(np.mean([c >= 1 - float(k[1]) for c in overall[k]]))
                                      for k in mine},
            "mean_set_size": {k[1]: float(np.nanmean(set_size[k])) for k in mine},
            "per_arm": {k[1]: {a: {"splits_with_questions": len(v),
                                   "covered_share": float(np.mean([c >= 1 - float(k[1]) for c in v]))
                                   if v else None,
                                   "coverage_mean": float(np.mean(v)) if v else None,
                                   "answers": len(arm_sizes[k][a]),
                                   "mean_set_size": float(np.mean(arm_sizes[k][a]))
                                   if arm_sizes[k][a] else None}
                               for a, v in per_arm[k].items()} for k in mine}}

    joint = AnswerSetConfig(delta=cfg.delta, guarantee="pac_all_arms")
    return {"splits": splits, "questions": n, "fit": half, "test": test_n,
            "pipeline_accuracy": {"mean": float(np.mean(accuracy)), "std": float(np.std(accuracy))},
            "arm_accuracy": {a: {"mean": float(np.mean(v)), "std": float(np.std(v))}
                             for a, v in arm_accuracy.items()},
            "splits_pinned": pinned,
            **summary("marginal"), "pac": {"delta": cfg.delta, **summary("pac")},
            "pac_all_arms": {"delta": cfg.delta, "delta_per_arm": arm_delta(joint, len(arms)),
                             **summary("pac_all_arms")},
            **{name: {"marginal": summary("marginal", fb), "pac": {"delta": cfg.delta, **summary("pac", fb)},
                      "pac_all_arms": {"delta": cfg.delta, **summary("pac_all_arms", fb)}}
               for name, fb in (("fallback_all_dev", "all_dev"), ("calibrate_on_arm", "arm"))}}
