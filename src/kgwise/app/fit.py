"""``fit``: learn the pipeline from the user's labelled dev questions.

1. Every arm answers every dev question it can (API arms concurrently), each call appended to
   ``fit-log.jsonl`` in the state directory as it finishes — a rerun resumes and pays for no finished
   call twice. The estimated spend (the arms' cost bounds of the calls still to make) is printed first;
   beyond ``max_spend`` nothing is called, and the run stops before a call that could pass it.
2. The log is split: ``calibration_share`` of the graded multiple-choice questions and, with
   ``uag_llm``, ``1 − uag_tune_share`` of the graded open ones (each interleaved, in log order) are held
   out — the router never learns from them — and calibrate the answer sets
   (:mod:`kgwise.app.calibration`, :mod:`kgwise.app.open_sets`); the rest teach the router. (A router
   that has learnt a question's outcome routes it to an arm that was right on it: sets calibrated on such
   questions under-cover new ones — on CSQA, 200 dev questions, α = 0.2 sets covered 52 % of new
   questions.)
3. The router's open settings — LinUCB's γ, the reward form (decomposed or not) and the context
   (``question``, or ``question+free`` or ``free`` when the config has free arms) — are chosen by two-fold
   cross-fitting on the learning part (:func:`kgwise.route.tuning.cross_fit`): on the questions every arm
   answered, for every grid point, a router warm-started on one half routes the other within the
   configured budget (per question: ``budget / horizon``, paced; without a horizon each half gets the
   whole budget), and the point with the best mean accuracy over the two folds wins (ties: lower cost).
   With free arms the grid also holds the ``predicted`` context, ``[1, p_1(x) … p_m(x)]`` from a success
   predictor learnt on the learning part, out of fold on its questions (:func:`predicted_context`); when
   it wins, the predictor is kept in the router's state and ``Pipeline.answer`` routes on it; and the
   ``predicted-free`` context, the same from a predictor of the free arms' confidence alone (their
   signals and agreement: no question form, no embedding; :data:`kgwise.route.features.FREE_ONLY`).
   This needs :data:`MIN_CROSS_FIT` such questions (each fold learns from and is scored on ≥ 50); on a
   smaller log the config's ``[coke]`` values and ``[router] context`` stay, and the report says why. A
   fresh router with the chosen settings is then warm-started on the learning part's graded outcomes
   (:meth:`kgwise.route.coke.CokeRouter.warm_start`). Routing has to earn its cost: the cross-fit also
   measures its gain over the best affordable single arm question by question, each fold routed with the
   settings that won on the other fold (:class:`kgwise.route.tuning.RoutingGain`); unless routing beats
   an arm that costs no more by more than ``[router] routing_gain_z`` standard errors (or, against a
   dearer arm, is not worse by more), the router is pinned to the best affordable single arm on the
   learning part (:meth:`~kgwise.route.coke.CokeRouter.pin`: it answers wherever it can and is
   affordable; ``pin_single_arm = false`` keeps routing and only reports it).
4. A copy of the fitted router is replayed over the held-out questions (select within the configured
   budget and horizon, then learn the logged outcome, as live; over the whole log, in sample, when
   nothing is held out) — its accuracy and spend are the fit report's expectation at the configured
   budget. The held-out questions' contexts, every arm's cost bound and every arm's non-conformity score
   (LAC or APS, :mod:`kgwise.conformal.split`) of the true choice are saved as the calibration; the
   report gives, per arm, the calibration questions the fitted router sends to it and the threshold,
   coverage and set size they give.
5. With ``[answer_sets] uag_llm``, UAG is tuned on the open questions the router learnt from and
   calibrated on the held-out ones, keeping each one's misses so that the held-out questions the router
   sends to an arm can calibrate that arm's sets (:mod:`kgwise.app.open_sets`); the report gives, per
   arm, those the fitted router sends there and what they certify.
6. A fit report (per arm accuracy and cost on the log, the settings used, the replay's accuracy, spend
   and routing shares, each arm's calibration, each prompt fit, UAG's calibration) is written as
   ``fit-report.json``.

An inject arm with ``combos`` answers in step 1 with each of them, and its prompt bandit is learnt before
step 2 (:mod:`kgwise.app.prompt_fit`): from then on the arm's call on a dev question is the one its
bandit picks, held-out questions picked by the bandit it keeps (saved in the state directory), learning
questions by a cross-fitted one.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from kgwise.app.arms import ArmRunner, PromptArm, arm_cost
from kgwise.app.calibration import (
    CalibrationSelector,
    HeldOutCalibration,
    calibrated_threshold,
    choice_set,
    guarantee_clause,
    made_with,
    needs_lines,
    nonconformity,
)
from kgwise.app.config import CONTEXTS, Context, PipelineConfig, reads_predictor
from kgwise.app.open_sets import FIT_REPORT_FILE, ArmOpenSet, OpenSetFit, OpenSets
from kgwise.app.pipeline import Pipeline
from kgwise.app.prompt_fit import PromptFit, fit_prompts
from kgwise.app.router import RouterAdapter, context_vector
from kgwise.datasets.user import read_questions
from kgwise.errors import ConfigError, KgwiseError
from kgwise.files import ResumeLog, short_hash, write_text_atomic
from kgwise.progress import bar, duration
from kgwise.route.arms import score_prediction
from kgwise.route.cascade import CascadeRule, fit_cascade
from kgwise.route.features import FREE_ONLY, FreeOutput, PreCallFeatures, PredictedContext, context_rows
from kgwise.route.predictor import SuccessPredictor, cross_fitted
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import CrossFitReport, TuningConfig, best_single_arm, cross_fit
from kgwise.types import Question, Usage

__all__ = ["LOG_FILE", "MIN_CROSS_FIT", "ArmFit", "FitReport", "LoggedCall", "RouterSelection",
           "SpendLimitError", "call_key", "fit", "fit_calls", "fit_questions", "held_out",
           "held_out_calibration", "interleaved", "predicted_context"]

LOG_FILE = "fit-log.jsonl"
REPORT_FILE = FIT_REPORT_FILE
UAG_TABLES = "uag-tables"
"""Where the fit builds UAG's tables of the open dev questions (in the state directory; resumable)."""
MIN_CROSS_FIT = 100
"""Questions answered by every arm that a log needs for cross-fitting the router's settings (two folds of
≥ 50: fewer leave the folds' accuracies a few questions apart, too noisy to rank 16 grid points)."""
CROSS_FIT_SEEDS = 2
"""Question orders (and router seeds) each grid point is run with on each fold."""


class SpendLimitError(KgwiseError):
    """The estimated or running spend of a fit would pass ``max_spend``."""


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One arm on one dev question, as logged: the answer, probabilities over choice labels, whether it
    was right, the cost in the budget's unit and the usage."""

    arm: str
    qid: str
    answer: str
    probabilities: dict[str, float]
    correct: bool
    cost: float
    usage: Usage
    signals: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RouterSelection:
    """How the router's γ, reward form and context were set: ``method`` ``"cross-fitting"`` (``cross_fit``
    holds every grid point's cross-fitted accuracy and cost, and routing's gain over the best affordable
    single arm) or ``"config"`` (the config's values; ``reason`` says why no cross-fitting); ``pinned``:
    the arm the fitted router answers with wherever it can (routing did not clear it,
    ``[router] pin_single_arm``), else ``None``; ``cascade``: the fitted cascade rule (its arms, threshold,
    escalation share and accuracy on the learning questions) when the context is ``cascade``."""

    method: str
    reason: str
    context: Context
    gamma: float | None
    decomposed_reward: bool
    cross_fit: CrossFitReport | None = None
    pinned: str | None = None
    cascade: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "reason": self.reason, "context": self.context, "gamma": self.gamma,
                "decomposed_reward": self.decomposed_reward,
                "cross_fit": None if self.cross_fit is None else self.cross_fit.to_dict(),
                "pinned": self.pinned, "cascade": self.cascade}

    def against_single_arm(self, z: float) -> str:
        """Routing's out-of-fold gain over the best affordable single arm and what the fit made of it, for
        the fit's output ('' without cross-fitting or an affordable arm)."""
        cf = self.cross_fit
        if cf is None or cf.single_arm is None or cf.gain is None:
            return ""
        g, one = cf.gain, cf.single_arm
        arm = one.arm_by_fold[0] if len(set(one.arm_by_fold)) == 1 else " / ".join(one.arm_by_fold)
        out = (f"; out of fold (each fold routed with the settings that won the other) routing "
               f"{g.accuracy:.3f} at {g.cost_per_question:.4g}/question against {g.single_arm_accuracy:.3f} "
               f"at {g.single_arm_cost_per_question:.4g} for always {arm}, the best affordable single arm: "
               f"gain {g.gain:+.3f} ± {g.se:.3f}")
        need = g.questions_needed(z)
        more = "" if need is None else (f" (a gain this size would be clear with about {need} questions the "
                                         f"router learns from, answered by every arm; it had {g.questions})")
        if self.pinned is not None:
            return out + (f", not clear of {z:g} standard errors{more}: the router answers with "
                          f"{self.pinned} wherever it can (pinned; [router] pin_single_arm = false routes "
                          "regardless)")
        if g.pays(z):
            return out
        return out + f": on this log routing does not beat answering with it alone{more}"


@dataclass(frozen=True, slots=True)
class ArmFit:
    """One arm on the log and in the fitted pipeline: ``calibration_size`` held-out questions the fitted
    router, as it stands after the fit, sends to it, with the ``threshold`` they give and the coverage
    and set size on them; ``calibration_routed_mean``: how many it was sent on average over the replay
    (the router's rule, and so the group, changes as it spends and learns)."""

    name: str
    answered: int
    accuracy: float | None
    cost_total: float
    cost_mean: float | None
    share_routed: float
    calibration_size: int
    threshold: float | None
    in_sample_coverage: float | None
    mean_set_size: float | None
    calibration_routed_mean: float | None = None


@dataclass(frozen=True, slots=True)
class FitReport:
    """What :func:`fit` did and found (see the module docstring)."""

    questions: int
    unit: str
    estimated_spend: float
    spent: float
    calls_made: int
    calls_resumed: int
    budget: float
    replay_accuracy: float
    replay_spend: float
    arms: tuple[ArmFit, ...]
    settings: dict[str, Any]
    guarantee: str
    not_fitted: tuple[str, ...]
    router_selection: RouterSelection | None = None
    prompts: tuple[PromptFit, ...] = ()
    open_sets: OpenSetFit | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "router_selection"}
        out["arms"] = [asdict(a) for a in self.arms]
        out["prompts"] = [asdict(p) for p in self.prompts]
        out["open_sets"] = None if self.open_sets is None else asdict(self.open_sets)
        out["router_selection"] = None if self.router_selection is None else self.router_selection.to_dict()
        return out


def call_key(arm: dict[str, Any], q: Question, combo: str | None = None) -> str:
    """A call's log key: the arm's fingerprint and the question; a call with one of an arm's ``combos`` is
    keyed as the same arm with that ``combo`` fixed (the same call), so either reuses the other's."""
    if combo is not None:
        arm = {k: v for k, v in arm.items() if k != "combos"} | {"combo": combo}
    return short_hash([arm, q.id, q.text, list(q.choice_texts)])


def fit(pipeline: Pipeline, questions_file: Path, max_spend: float = 0.0, concurrency: int = 4,
        echo: Callable[[str], None] = print, force: bool = False) -> FitReport:
    """Fit ``pipeline`` on ``questions_file`` (module docstring). ``max_spend`` is in the budget's unit.
    Refuses while decisions await feedback (a new router would lose them) unless ``force``."""
    return fit_questions(pipeline, questions_file, max_spend, concurrency, echo, force)


def fit_questions(pipeline: Pipeline, source: Path | Sequence[Question], max_spend: float = 0.0,
                  concurrency: int = 4, echo: Callable[[str], None] = print, force: bool = False
                  ) -> FitReport:
    """:func:`fit` on a questions file or on labelled questions already read."""
    if not (math.isfinite(max_spend) and max_spend >= 0):
        raise ConfigError(f"max_spend must be a number ≥ 0, got {max_spend}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be ≥ 1, got {concurrency}")
    if not pipeline.runners:
        raise ConfigError("fit needs the arms' models: open the pipeline with models=True")
    state = pipeline.state
    refuse_pending(pipeline, force, "kgwise fit --force …")
    questions = read_questions(source, require_gold=True) if isinstance(source, Path) else list(source)
    config = pipeline.config
    unit = config.router.unit
    arm_fp = {a.name: a.fingerprint() for a in config.arms}
    log = ResumeLog(state.root / LOG_FILE, "kgwise.fit.v1", on_other="restart", fsync=True)
    todo: list[tuple[str, Question, float, str | None]] = []
    resumed = 0
    for q in questions:
        for name, runner in pipeline.runners.items():
            if not runner.can_answer(q):
                continue
            for combo in fit_calls(runner, q):
                if log.get(call_key(arm_fp[name], q, combo)) is not None:
                    resumed += 1
                else:
                    todo.append((name, q, arm_cost(runner.config, runner.usage_bound(q)), combo))
    estimate = float(sum(t[2] for t in todo))
    echo(f"fit: {len(questions)} questions × {len(config.arms)} arms: {len(todo)} calls to make "
         f"({resumed} already in {state.root / LOG_FILE}); estimated spend {estimate:.6g} {unit} "
         f"(limit {max_spend:g})")
    if estimate > max_spend:
        raise SpendLimitError(f"the estimated spend {estimate:.6g} {unit} exceeds max_spend {max_spend:g}: "
                              f"nothing was called; raise --max-spend to at least {estimate:.6g}")
    spent = 0.0
    lock = threading.Lock()

    def run(name: str, q: Question, bound: float, combo: str | None) -> None:
        nonlocal spent
        with lock:
            if spent + bound > max_spend:
                raise SpendLimitError(f"stopped before a call that could pass max_spend {max_spend:g} "
                                      f"({spent:.6g} {unit} spent); rerun with a higher limit to resume")
            spent += bound  # held until the call reports its cost
        runner = pipeline.runners[name]
        try:
            out = runner.answer(q) if combo is None else cast(PromptArm, runner).answer(q, combo)
        except BaseException:
            with lock:
                spent -= bound
            raise
        cost = arm_cost(runner.config, out.usage)
        row = {"arm": name, "qid": q.id, "answer": out.prediction, "probabilities": out.probabilities,
               "correct": score_prediction(q, out.prediction) if out.correct is None else out.correct,
               "cost": cost, "usage": out.usage.to_dict(), "signals": list(out.signals)}
        with lock:
            spent += cost - bound
            log.put(call_key(arm_fp[name], q, combo), row)

    local = [t for t in todo if not pipeline.runners[t[0]].config.is_api]
    remote = [t for t in todo if pipeline.runners[t[0]].config.is_api]
    started = time.perf_counter()
    with bar(total=len(todo), desc="fit: arm calls", unit="call") as progress:  # on a terminal only
        for t in local:
            run(*t)
            progress.update()
        if remote:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                for fut in as_completed([pool.submit(run, *t) for t in remote]):
                    fut.result()
                    progress.update()
    if todo:
        echo(f"fit: {len(todo)} calls made in {duration(time.perf_counter() - started)}, {spent:.6g} {unit} "
             "spent")
    calls, prompts = _calls(log, questions, pipeline, arm_fp)
    return _fit_from_log(pipeline, questions, calls, estimate, spent, len(todo), resumed, echo, prompts)


def fit_calls(runner: ArmRunner, q: Question) -> tuple[str | None, ...]:
    """The combinations an arm answers ``q`` with during a fit: each of an inject arm's ``combos`` that
    can answer it, else its one way of answering (``None``)."""
    return cast(PromptArm, runner).combos_for(q) if runner.config.combos else (None,)


def _logged(name: str, q: Question, row: dict[str, Any]) -> LoggedCall:
    return LoggedCall(name, q.id, str(row["answer"]), dict(row["probabilities"]), bool(row["correct"]),
                      float(row["cost"]), Usage.from_dict(row["usage"]),
                      tuple(float(v) for v in row.get("signals", [])))


def _calls(log: ResumeLog, questions: Sequence[Question], pipeline: Pipeline, arm_fp: dict[str, Any]
           ) -> tuple[dict[tuple[str, str], LoggedCall], tuple[PromptFit, ...]]:
    """Every arm's logged call per question — for an inject arm with ``combos``, the call of the
    combination its prompt bandit picks (:func:`kgwise.app.prompt_fit.fit_prompts`, which learns that
    bandit and hands it to the arm and the state) — and the prompt fits."""
    out = {}
    prompts = []
    held = _held_out(pipeline, questions)
    for name, runner in pipeline.runners.items():
        combos = cast(PromptArm, runner).combos if runner.config.combos else ()
        rows = {(q.id, c): _logged(name, q, row) for q in questions if runner.can_answer(q)
                for c in fit_calls(runner, q) if (row := log.get(call_key(arm_fp[name], q, c))) is not None}
        if not combos:
            out.update({(name, qid): call for (qid, _), call in rows.items()})
            continue
        arm = cast(PromptArm, runner)
        R = np.array([[float(rows[(q.id, c)].correct) if (q.id, c) in rows else math.nan for c in combos]
                      for q in questions]).reshape(len(questions), len(combos))
        E = arm.encoder.encode([q.text for q in questions])
        bandit, picks, report = fit_prompts(name, combos, E, R, held, pipeline.config.router.seed)
        if bandit is not None:
            bandit.scoring = runner.config.scoring
        arm.use_bandit(bandit)  # None: the first combination, as the log's calls were picked
        pipeline.state.save_prompt_bandit(name, bandit)
        pipeline.prompt_problems.pop(name, None)
        prompts.append(report)
        out.update({(name, q.id): rows[(q.id, combos[p])] for q, p in zip(questions, picks, strict=True)
                    if p is not None})
    return out, tuple(prompts)


def _replay(router: RouterAdapter, questions: Sequence[Question], calls: dict[tuple[str, str], LoggedCall],
            X: np.ndarray, order: Sequence[int], bounds: Callable[[Question], dict[str, float]],
            before: Callable[[RouterAdapter], None] | None = None) -> list[str | None]:
    """``router``'s arm for each question of ``order`` in turn, as live: select within the budget by the
    arms' cost ``bounds`` (an arm without a logged call is out of reach), then learn the logged outcome
    and pay the logged cost (``None``: nothing affordable); ``before`` sees the router before each
    selection."""
    out: list[str | None] = []
    for i in order:
        if before is not None:
            before(router)
        q = questions[i]
        held = bounds(q)
        costs = {a: held[a] if (a, q.id) in calls else router.unreachable() for a in router.names}
        arm = router.select(X[i], costs)
        out.append(arm)
        if arm is not None:  # paid as live: a cost above its bound is recorded as an overrun
            c = calls[(arm, q.id)]
            router.charge(arm, c.cost, costs[arm])
            router.learn(arm, X[i], float(c.correct), c.cost)
    return out


def held_out(questions: Sequence[Question], share: float, open_share: float = 0.0) -> list[bool]:
    """Which questions calibrate the sets (step 2 of the module docstring): ``share`` of the graded
    multiple-choice ones and ``open_share`` of the graded open ones, each interleaved in log order (the
    ``j``-th question of its kind is held out when ``⌊(j+1)·share⌋ > ⌊j·share⌋``)."""
    out = []
    seen = {True: 0, False: 0}
    for q in questions:
        mc = bool(q.choices)
        if not q.gold:
            out.append(False)
            continue
        out.append(interleaved(seen[mc], share if mc else open_share))
        seen[mc] += 1
    return out


def interleaved(j: int, share: float) -> bool:
    """Whether the ``j``-th question (from 0) is held out when ``share`` of them are, evenly in order:
    ``⌊(j+1)·share⌋ > ⌊j·share⌋``."""
    return math.floor((j + 1) * share) > math.floor(j * share)


def _held_out(pipeline: Pipeline, questions: Sequence[Question]) -> list[bool]:
    """:func:`held_out` at the pipeline's shares: open questions only when they get UAG's sets
    (``1 − uag_tune_share`` of them, :mod:`kgwise.app.open_sets`)."""
    sets = pipeline.config.answer_sets
    open_share = 0.0 if sets.uag_llm is None else 1.0 - sets.uag_tune_share
    return held_out(questions, sets.calibration_share, open_share)


def refuse_pending(pipeline: Pipeline, force: bool, command: str) -> None:
    """``ConfigError`` while decisions await feedback (a fit replaces the router and would drop them),
    unless ``force``; ``command``: the fit's own command with ``--force``."""
    state = pipeline.state
    if state.pending and not force:
        raise ConfigError(f"{len(state.pending)} decision(s) in {state.root} await feedback; a fit replaces "
                          "the router and would drop them: give their feedback first (`kgwise feedback ID "
                          f"--correct|--wrong`), or drop them with `{command}`")


def _fit_from_log(pipeline: Pipeline, questions: Sequence[Question], calls: dict[tuple[str, str], LoggedCall],
                  estimate: float, spent: float, made: int, resumed: int, echo: Callable[[str], None],
                  prompts: tuple[PromptFit, ...] = ()) -> FitReport:
    """Steps 2–6 of the module docstring on logged calls."""
    for p in prompts:
        echo(f"fit: {p.arm}'s prompt bandit: {p.reason}" if p.reason else
             f"fit: {p.arm}'s prompt bandit over {p.questions} questions — each combination: "
             + ", ".join(f"{c} {a:.3f}" for c, a in p.accuracy.items())
             + f"; cross-fitted picks {_fmt(p.cross_fitted_accuracy)}; on {p.held_out_questions} held-out "
             "questions each: " + ", ".join(f"{c} {a:.3f}" for c, a in p.held_out_accuracy_each.items())
             + f", the bandit's picks {_fmt(p.held_out_accuracy)}, picking "
             + ", ".join(f"{c} {s:.0%}" for c, s in p.held_out_share.items()))
    config = pipeline.config
    sets = config.answer_sets
    names = list(config.names)
    E = np.asarray(pipeline.encoder.encode([q.text for q in questions]), dtype=np.float64)
    held = _held_out(pipeline, questions)
    learn = [i for i, h in enumerate(held) if not h]
    hold = [i for i, h in enumerate(held) if h]
    learn_q = [questions[i] for i in learn]
    free: dict[str, list[FreeOutput]] = {
        n: [(calls[(n, q.id)].answer, calls[(n, q.id)].signals)
            if (n, q.id) in calls and calls[(n, q.id)].cost == 0.0 else ("", ()) for q in questions]
        for n in config.free_arms}
    Y = np.array([[float(calls[(n, q.id)].correct) if (n, q.id) in calls else math.nan for n in names]
                  for q in questions], dtype=np.float64).reshape(len(questions), len(names))
    contexts = {"question": E}
    for context in ("question+free", "free") if config.free_arms else ():
        contexts[context] = np.stack([context_vector(config, context, e, {n: v[i] for n, v in free.items()})
                                      for i, e in enumerate(E)])
    predicted, why_not = predicted_context(config, questions, free, Y, E, learn)
    predictors: dict[str, PredictedContext] = {}
    if predicted is not None:
        contexts["predicted"], predictors["predicted"], _ = predicted
        contexts["cascade"] = contexts["predicted"]
        predictors["cascade"] = predictors["predicted"]
        made_free, _ = predicted_context(config, questions, free, Y, E, learn, free_only=True)
        if made_free is not None:  # the same outcomes: made whenever ``predicted`` is
            contexts[FREE_ONLY], predictors[FREE_ONLY], _ = made_free
    elif reads_predictor(config.router.context):
        raise ConfigError(f"[router] context = {config.router.context!r} needs the success predictor, and "
                          f"{why_not}")
    selection = _select_router(config, learn_q, calls, {k: v[learn] for k, v in contexts.items()})
    cascade = (_cascade(config, learn_q, calls, contexts["cascade"][learn], predicted[2][learn])
               if selection.context == "cascade" and predicted is not None else None)
    if cascade is not None:
        selection = replace(selection, cascade=cascade.to_dict(names))
    echo(f"fit: {len(hold)} of {len(questions)} questions held out to calibrate the sets; router settings by "
         f"{selection.method}: context {selection.context}, gamma "
         f"{'Eq. 12' if selection.gamma is None else selection.gamma}, decomposed reward "
         f"{selection.decomposed_reward}" + (f" ({selection.reason})" if selection.reason else "")
         + selection.against_single_arm(config.router.routing_gain_z))
    X = contexts[selection.context]
    coke = replace(config.router.coke, gamma_override=selection.gamma,
                   decomposed_reward=selection.decomposed_reward)
    rewards = {n: Y[learn, a].tolist() for a, n in enumerate(names)}
    router = RouterAdapter.new(config, X.shape[1], coke)
    if reads_predictor(selection.context):
        router.predicted = predictors[selection.context]
    router.router.cascade = cascade
    learnt = router.warm_start(X[learn], rewards)
    router.pin(selection.pinned)
    calibration = held_out_calibration(pipeline, [questions[i] for i in hold], calls, X[hold],
                                       selection.context, learn_q)
    selector = CalibrationSelector(calibration)
    group = selector.group(router.router, "fit")
    mc = np.asarray([bool(questions[i].choices) for i in hold], dtype=bool)
    routed_sizes: list[np.ndarray] = []  # per replay step, the held-out MC questions each arm is sent

    def watch(r: RouterAdapter) -> None:
        g = selector.group(r.router, f"replay {len(routed_sizes)}")[mc]
        routed_sizes.append(np.bincount(g[g >= 0], minlength=len(names)))

    replay_on = hold or list(range(len(questions)))
    replay = router.copy()
    routed = _replay(replay, questions, calls, X, replay_on, pipeline.bounds,
                     watch if len(calibration) else None)
    selector.release()
    routed_mean = np.mean(routed_sizes, axis=0) if routed_sizes else None
    got = sum(float(calls[(a, questions[i].id)].correct)
              for i, a in zip(replay_on, routed, strict=True) if a is not None)
    arm_fits = []
    for name in names:
        mine = [calls[(name, q.id)] for q in questions if (name, q.id) in calls]
        scores = calibration.arm_scores(name, group)
        threshold = calibrated_threshold(scores.tolist(), sets, len(names))
        a = names.index(name)
        arm_sets = [(q, choice_set(calls[(name, q.id)].probabilities, [c.label for c in q.choices], sets.kind,
                                   threshold))
                    for q in (questions[i] for i, g in zip(hold, group, strict=True) if g == a)
                    if (name, q.id) in calls] if math.isfinite(threshold) else []
        sizes = [len(m) for _, m in arm_sets]
        covered = [q.gold[0] in m for q, m in arm_sets]
        arm_fits.append(ArmFit(
            name, len(mine), float(np.mean([c.correct for c in mine])) if mine else None,
            float(sum(c.cost for c in mine)), float(np.mean([c.cost for c in mine])) if mine else None,
            sum(r == name for r in routed) / len(replay_on), len(scores),
            threshold if math.isfinite(threshold) else None,
            float(np.mean(covered)) if covered else None, float(np.mean(sizes)) if sizes else None,
            None if routed_mean is None else float(routed_mean[a])))
    if mc.any():
        for line in needs_lines(calibration, group, sets):
            echo(f"fit: {line}")
    if sets.calibrate_on == "arm":  # every set from all graded dev questions its arm answered
        guarantee = (f"per arm: P(truth ∈ set) ≥ {1 - sets.alpha:g} for a question like the dev log answered "
                     "by that arm (split conformal on all graded dev questions it answered, ties split by a "
                     f"seeded coin; {guarantee_clause(sets, len(names))}), not conditional on the router's "
                     "choice; `kgwise status` tracks live coverage")
    else:
        guarantee = (f"per arm: P(truth ∈ set) ≥ {1 - sets.alpha:g} for a question the router, as it "
                     "stands, sends to that arm, over questions exchangeable with the dev log (split "
                     f"conformal on the {int(mc.sum())} held-out multiple-choice dev questions the same rule "
                     f"sends there; {guarantee_clause(sets, len(names))}); `kgwise status` tracks live "
                     "coverage")
    not_fitted = tuple(f"{p.arm}'s prompt bandit: {p.reason}" for p in prompts if p.reason)
    if predicted is None and config.free_arms:  # named: the fit did not consider it
        not_fitted = (f"the 'predicted' router context (a success predictor): {why_not}", *not_fitted)
    if selection.method != "cross-fitting":
        not_fitted = (f"router settings (γ, reward form, context) are the config's: {selection.reason}",
                      *not_fitted)
    silent = [f.name for f in arm_fits if f.answered == 0]
    if silent:  # named: nothing about these arms was learnt or calibrated
        not_fitted = (*not_fitted, f"arm(s) {', '.join(silent)} answered none of the {len(questions)} dev "
                      "questions: no routing evidence, set or abstention rule for them")
    settings = {"coke": asdict(coke), "context": selection.context, "budget": config.router.budget,
                "unit": config.router.unit,
                "horizon": config.router.horizon, "seed": config.router.seed, "alpha": sets.alpha,
                "kind": sets.kind, "guarantee": sets.guarantee, "calibrate_on": sets.calibrate_on,
                "outcomes_learnt": learnt,
                "held_out": len(hold), "replay_on": "held-out" if hold else "in-sample"}
    n = len(questions)
    row_of = {i: r for r, i in enumerate(hold)}
    open_fit = _fit_open_sets(pipeline, questions, [row_of.get(i) for i in range(n)],
                              str(calibration.meta["fit"]), group, echo)
    if open_fit is not None and open_fit.reason:
        not_fitted = (*not_fitted, f"UAG's sets for open questions: {open_fit.reason}")
    report = FitReport(n, config.router.unit, estimate, spent, made, resumed, config.router.budget,
                       got / len(replay_on), replay.spent, tuple(arm_fits), settings, guarantee, not_fitted,
                       selection, prompts, open_fit)
    state = pipeline.state
    state.replace_router(router, selection.context)
    state.save_calibration(calibration)
    state.save()
    write_text_atomic(state.root / REPORT_FILE, json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    echo(f"fit: router warm-started on {learnt} outcomes; replay accuracy {got / len(replay_on):.3f} "
         f"({settings['replay_on']}), spend {replay.spent:.6g} {config.router.unit}; report in "
         f"{state.root / REPORT_FILE}")
    return report


def _fit_open_sets(pipeline: Pipeline, questions: Sequence[Question], held_rows: Sequence[int | None],
                   fit_id: str, group: np.ndarray, echo: Callable[[str], None]) -> OpenSetFit | None:
    """Step 5 of the module docstring: UAG calibrated for open questions when ``[answer_sets] uag_llm`` is set
    (:mod:`kgwise.app.open_sets`), saved in the state (an old calibration is removed when none is
    certified) and used by ``pipeline`` from now on."""
    from kgwise.app.open_sets import calibrate_open_sets

    sets = pipeline.config.answer_sets
    if sets.uag_llm is None:
        return None
    state = pipeline.state
    if pipeline.kg is None:
        raise ConfigError("fit needs the KG to calibrate UAG's sets: open the pipeline with models=True")
    calibrated, report = calibrate_open_sets(pipeline.kg, pipeline.topic_entities, questions, held_rows,
                                             fit_id, sets, state.root / UAG_TABLES, echo,
                                             pipeline.uag_generator)
    pipeline.open_sets, pipeline.open_sets_problem = None, None
    if calibrated is None:
        state.uag_file.unlink(missing_ok=True)
        echo(f"fit: no UAG sets for open questions: {report.reason}")
    else:
        calibrated.save(state.uag_file)
        open_sets = OpenSets(calibrated, pipeline.kg, state.uag_file, pipeline.uag_generator)
        pipeline.open_sets = open_sets
        report = replace(report, per_arm=tuple(_arm_open_set(open_sets, group, a, name)
                                               for a, name in enumerate(pipeline.config.names)))
        echo(f"fit: UAG's sets for open questions: {report.summary['note']}; per arm, on the held-out open "
             "questions the fitted router sends it: " + "; ".join(
                 f"{s.arm} {s.questions}, " + ("none certified" if s.lambda_ is None else
                                              f"λ={s.lambda_}, miss rate {s.miss_rate:.3f}")
                 + ("" if s.largest_miss_rate is None else f" (largest set {s.largest_miss_rate:.3f})")
                 for s in report.per_arm))
    return report


def _arm_open_set(open_sets: OpenSets, group: np.ndarray, a: int, name: str) -> ArmOpenSet:
    """Arm ``a``'s held-out open questions under ``group``, what LTT certifies on them and how often UAG's
    largest set misses them."""
    uag, rows = open_sets.for_arm(group, a)
    groups = open_sets.calibration.groups
    assert groups is not None  # for_arm checked it
    largest = groups.miss_rate(rows, groups.largest()) if rows.size else None
    if uag is None:
        return ArmOpenSet(name, int(rows.size), largest_miss_rate=largest)
    assert uag.lambda_ is not None
    return ArmOpenSet(name, int(rows.size), uag.lambda_, groups.miss_rate(rows, uag), largest)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def held_out_calibration(pipeline: Pipeline, questions: Sequence[Question],
                         calls: Mapping[tuple[str, str], LoggedCall], X: np.ndarray, context: Context,
                         tune: Sequence[Question] = ()) -> HeldOutCalibration:
    """The held-out ``questions``' router contexts ``X``, every arm's cost bound and score of the true
    choice in ``calls`` (NaN: the arm gave no graded choice, e.g. on an open question), the same scores on
    the ``tune`` questions for the arms whose answers the fit does not tune (the small-data fallback,
    :mod:`kgwise.app.calibration`), and for abstention
    every arm's confidence and correctness on them and on the ``tune`` questions (those the router learns
    from, :func:`kgwise.app.abstain.answer_confidences`)."""
    from kgwise.app.abstain import answer_confidences, witnesses

    config = pipeline.config
    names = list(config.names)
    kind = config.answer_sets.kind
    bounds = np.asarray([[b[n] for n in names] for b in map(pipeline.bounds, questions)],
                        dtype=np.float64).reshape(len(questions), len(names))

    def true_scores(rows: Sequence[Question], arms: Sequence[str]) -> np.ndarray:
        out = np.full((len(rows), len(names)), np.nan)
        for i, q in enumerate(rows):
            labels = [ch.label for ch in q.choices]
            for a, name in enumerate(names):
                c = calls.get((name, q.id))
                if name in arms and q.choices and c is not None and c.probabilities:
                    out[i, a] = nonconformity(kind, c.probabilities, labels)[q.gold_index]
        return out

    scores = true_scores(questions, names)
    # an inject arm's call on a learning question is picked by a bandit the fit learns on the dev log: its
    # score there is not exchangeable with a new question's, so only its held-out scores calibrate
    fixed = [a.name for a in config.arms if not a.combos]
    seen = witnesses(config, context)
    confidence, correct = answer_confidences(questions, names, calls, seen)
    tune_confidence, tune_correct = answer_confidences(tune, names, calls, seen)
    return HeldOutCalibration(tuple(names), kind, np.asarray(X, dtype=np.float64), bounds, scores,
                              {"questions": len(questions), "alpha": config.answer_sets.alpha, "kind": kind,
                               "context": context, "fit": pipeline.new_id(), "made_with": made_with(config)},
                              confidence, correct, tune_confidence, tune_correct, seen,
                              true_scores(tune, fixed))


PREDICTOR_FOLDS = 3
"""Folds of the out-of-fold predictions the ``predicted`` context is cross-fitted and warm-started on."""
MIN_PREDICTOR_GRADED = 10
"""Graded outcomes per arm and fold the success predictor needs (fewer: no ``predicted`` context)."""


def predicted_context(config: PipelineConfig, questions: Sequence[Question],
                       free: Mapping[str, Sequence[FreeOutput]], Y: np.ndarray, E: np.ndarray,
                       learn: Sequence[int], free_only: bool = False
                       ) -> tuple[tuple[np.ndarray, PredictedContext, np.ndarray] | None, str]:
    """The ``predicted`` router context of every question and the predictor the pipeline keeps, or why
    there is none. The features (:class:`kgwise.route.features.PreCallFeatures`: the free arms' answers
    and signals, the question's form, up to 16 principal components of its embedding, one per 20
    questions) are fitted on the questions the router learns from; on those, each row is predicted out of
    fold (:data:`PREDICTOR_FOLDS` folds, each by a predictor fitted on the others), so the cross-fitting of
    the router's settings and its warm start read predictions that never saw the question's own outcome;
    the other (held-out) rows, like new questions, by the predictor fitted on all of them — the one kept;
    last, that kept predictor's rows of every question (how its predictions spread over questions, which
    a cascade's threshold reads). ``free_only``: the features are the free arms' confidence alone (no
    form, no embedding components; the ``predicted-free`` context)."""
    if not config.free_arms:
        return None, "the config has no free arm (its answers and signals are the predictor's evidence)"
    names = list(config.names)
    rows = np.asarray(learn, dtype=np.int64)
    graded = (~np.isnan(Y[rows])).sum(axis=0) if len(rows) else np.zeros(len(names))
    need = MIN_PREDICTOR_GRADED * PREDICTOR_FOLDS
    if graded.min() < need:
        thin = [f"{n} ({int(g)})" for n, g in zip(names, graded, strict=True) if g < need]
        return None, (f"the router learns from too few graded outcomes of {', '.join(thin)} (the predictor "
                      f"needs {need} per arm)")
    features = PreCallFeatures.fit({n: [v[i] for i in rows] for n, v in free.items()}, E[rows],
                                   dims=0 if free_only else 16, form=not free_only)
    F = features.rows([q.text for q in questions], E, free)
    P = np.zeros_like(Y)
    P[rows] = cross_fitted(F[rows], Y[rows], [np.arange(k, len(rows), PREDICTOR_FOLDS)
                                             for k in range(PREDICTOR_FOLDS)])
    predictor = SuccessPredictor(len(names)).fit(F[rows], Y[rows])
    kept = predictor.predict(F)
    rest = np.setdiff1d(np.arange(len(questions)), rows)
    P[rest] = kept[rest]
    return (context_rows(P), PredictedContext(features, predictor), context_rows(kept)), ""


def _cascade(config: PipelineConfig, questions: Sequence[Question],
             calls: Mapping[tuple[str, str], LoggedCall], X: np.ndarray, kept: np.ndarray) -> CascadeRule:
    """The cascade rule (:func:`kgwise.route.cascade.fit_cascade`) on the learning questions every arm
    answered, their out-of-fold ``[1, p(x)]`` rows ``X`` (the kept predictor's: ``kept``), under the
    configured budget per question (``budget / horizon``; without a horizon, the budget spread over these
    questions)."""
    rows, correct, cost = _answered_by_all(config, questions, calls)
    if not rows:
        raise ConfigError("the cascade needs learning questions that every arm answered")
    r = config.router
    return fit_cascade(X[rows], correct.astype(np.float64), cost, r.budget / (r.horizon or len(rows)),
                       kept[rows])


def _answered_by_all(config: PipelineConfig, questions: Sequence[Question],
                     calls: Mapping[tuple[str, str], LoggedCall]) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The questions every arm answered (their indices) and each arm's correctness and cost on them."""
    names = list(config.names)
    rows = [i for i, q in enumerate(questions) if all((n, q.id) in calls for n in names)]
    qs = [questions[i] for i in rows]
    correct = np.array([[calls[(n, q.id)].correct for n in names] for q in qs],
                       dtype=bool).reshape(len(qs), len(names))
    cost = np.array([[calls[(n, q.id)].cost for n in names] for q in qs],
                    dtype=np.float64).reshape(len(qs), len(names))
    return rows, correct, cost


def _select_router(config: PipelineConfig, questions: Sequence[Question],
                   calls: dict[tuple[str, str], LoggedCall], contexts: dict[str, np.ndarray]
                   ) -> RouterSelection:
    """Step 2 of the module docstring: the router's γ, reward form and context."""
    coke = config.router.coke
    keep = RouterSelection("config", "", config.router.context, coke.gamma_override, coke.decomposed_reward)
    names = list(config.names)
    rows, correct, cost = _answered_by_all(config, questions, calls)
    if len(names) < 2:
        return replace(keep, reason="one arm: nothing to route")
    if len(rows) < MIN_CROSS_FIT:
        return replace(keep, reason=f"{len(rows)} questions answered by every arm, fewer than the "
                                    f"{MIN_CROSS_FIT} cross-fitting needs")
    qs = [questions[i] for i in rows]
    table = OutcomeTable(tuple(q.id for q in qs), tuple(q.text for q in qs), tuple(names),
                         tuple(a.cluster for a in config.arms),
                         tuple(a.reported_accuracy for a in config.arms), correct, cost, config.router.unit)
    r = config.router
    horizon = r.horizon

    def budget(half: OutcomeTable) -> float:
        return float(r.budget if horizon is None else r.budget * half.n_questions / horizon)

    report = cross_fit(table, {k: v[rows] for k, v in contexts.items()}, coke, budget,
                       paced=r.horizon is not None, config=TuningConfig(), seeds=CROSS_FIT_SEEDS)
    c = report.chosen
    context = next(x for x in CONTEXTS if x == c.context)
    pinned = None
    if r.pin_single_arm and report.gain is not None and not report.gain.pays(r.routing_gain_z):
        arm = best_single_arm(table, table, budget(table))
        pinned = None if arm is None else names[arm]
    return RouterSelection("cross-fitting", "", context, c.gamma, c.decomposed_reward, report, pinned)
