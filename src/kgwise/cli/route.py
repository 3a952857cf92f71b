"""``kgwise eval route`` (Coke replay experiment on WebQSP) and ``kgwise bench route`` (router speed)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from kgwise.cli.apps import bench_app, eval_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    GradedLogOption,
    JsonOption,
    LogArmsOption,
    distinct_outputs,
    err_console,
    friendly_errors,
    listed,
    write_json,
)
from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.llm.base import ScoringRule, scoring_rule
from kgwise.route.arms import Cluster


def _progress_file(out: Path | None, tag: str) -> Path | None:
    return None if out is None else out.with_name(f"{out.stem}.{tag}.runs.jsonl")


_SENSITIVITY: tuple[tuple[str, dict[str, Any]], ...] = (
    ("paper: delta=0.05, Eq. 14 exactly (regret_prior=0)", {"delta": 0.05, "regret_prior": 0.0}),
    ("delta=0.9 (smallest gamma of Eq. 12), regret_prior=10", {"delta": 0.9, "regret_prior": 10.0}),
    ("gamma=0.5 (below Eq. 12's range), regret_prior=10", {"gamma_override": 0.5, "regret_prior": 10.0}),
    ("decomposed reward r - E[theta_c] for LinUCB", {"decomposed_reward": True}),
)


def _sensitivity(table: Any, X: np.ndarray, base: Any, seeds: int) -> list[dict[str, Any]]:
    """Coke for settings the paper leaves open (δ, the cost-regret prior, the LinUCB target), same orders."""
    from kgwise.eval.route.experiment import simulate
    from kgwise.route.coke import CokeRouter

    out = []
    max_cost = float(table.cost.sum(axis=0).max())
    for label, change in _SENSITIVITY:
        cfg = replace(base.coke, **change)
        accs, costs = [], []
        for s in range(seeds):
            order = np.random.default_rng(s).permutation(table.n_questions)
            router = CokeRouter(
                table.arm_specs(),
                X.shape[1],
                budget=base.budget_fraction * max_cost,
                config=cfg,
                seed=s,
            )
            run = simulate(router, table, X, order)
            accs.append(run.accuracy)
            costs.append(run.total_cost)
        out.append(
            {
                "setting": label,
                "gamma": cfg.gamma,
                "accuracy": float(np.mean(accs)),
                "accuracy_std": float(np.std(accs, ddof=1)) if seeds > 1 else 0.0,
                "cost": float(np.mean(costs)),
                "cost_std": float(np.std(costs, ddof=1)) if seeds > 1 else 0.0,
            }
        )
    return out


@eval_app.command("route")
@friendly_errors
def eval_route(
    dataset: Annotated[str, typer.Option(help="Replay data set (recorded outcomes): webqsp.")] = "webqsp",
    budget_fraction: Annotated[float, typer.Option(
        help="Budget B as a fraction of the cost of always calling the most expensive arm (the report gives "
             "the amount it comes to as 'budget').")] = 1.0,
    lam: Annotated[float | None, typer.Option(
        "--lambda", help="λ, weight of the cost regret (Eq. 2) (default: the --config's, else 1).",
        show_default=False)] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Question orders (mean ± std over them).")] = 10,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Replay only the first N questions of the file (a quick look; default: all).")] = None,
    delta: Annotated[float | None, typer.Option(
        help="δ of LinUCB's width γ = 1 + √(ln(2/δ)/2) (default: the --config's, else 0.05).",
        show_default=False)] = None,
    gamma: Annotated[float | None, typer.Option(
        help="Set LinUCB's width γ directly (overrides δ; below 1.59 lies outside the paper's formula).")
    ] = None,
    regret_prior: Annotated[float | None, typer.Option(
        help="Pseudo-questions smoothing the cost regret (0 = Eq. 14 exactly) (default: the --config's, "
             "else 10).", show_default=False)] = None,
    config: ConfigOption = None,
    gpt4: Annotated[bool, typer.Option(help="Also run with GPT-4 on the questions its file covers.")] = True,
    sensitivity: Annotated[
        bool, typer.Option(help="Also run Coke for the settings the paper leaves open (δ, priors).")
    ] = True,
    tune: Annotated[bool, typer.Option(
        help="Also cross-tune price-paced Coke's open settings (γ, decomposed reward, context) on one half "
             "of the questions and score them on the other.")] = True,
    plots: Annotated[bool, typer.Option(help="Save the figures next to the JSON.")] = True,
    log: GradedLogOption = None,
    log_arms: LogArmsOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Coke vs single arms, random, oracle, ablations, threshold router and mabwiser on recorded outcomes
    (WebQSP's, or your graded log's)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.embed import MiniLM
    from kgwise.eval.route.experiment import ExperimentConfig, run_experiment
    from kgwise.eval.route.plots import plot_all
    from kgwise.eval.route.replay import MAIN_ARMS, WEBQSP_ARMS, free_gnn_signals, webqsp_table
    from kgwise.settings import configured

    if log is None and log_arms:
        raise ConfigError("--arm goes with --log FILE (WebQSP's arms are known)")
    if log is None and dataset != "webqsp":
        raise ConfigError(f"replay data set {dataset!r} has no recorded outcomes (only 'webqsp' has): give "
                          "your graded log with --log FILE --arm NAME:CLUSTER:ACCURACY …")
    cfg = ExperimentConfig(budget_fraction=budget_fraction, seeds=seeds, coke=configured(
        "coke", config, lam=lam, delta=delta, regret_prior=regret_prior, gamma_override=gamma))
    encoder = MiniLM()
    if log is not None:
        table, coverage, free, free_arms = log_table(log, log_arms or [])
        gpt4 = False  # the GPT-4 subset is WebQSP's
    else:
        root = data_dir(data)
        table, coverage = webqsp_table(root, MAIN_ARMS)
        free_arms = _free_arms(table)
    table = table.head(limit)
    err_console.print(f"{table.n_questions} questions × {table.n_arms} arms; embedding questions …")
    X = np.asarray(encoder.encode(list(table.texts)), dtype=np.float64)
    contexts = {}
    if log is None:
        free = free_gnn_signals(root, table)
    elif free is not None:
        free = free[: table.n_questions]
    if free is not None:
        signals = np.hstack([np.ones((table.n_questions, 1)), free])  # with a constant: LinUCB's intercept
        contexts = {"free_gnn_signals": signals, "free_gnn_signals+embedding": np.hstack([signals, X])}
    report = run_experiment(table, X, cfg, _progress_file(json_out, "main"), contexts=contexts)
    report["coverage"] = coverage
    report["limit"] = limit
    report["hindsight_cascade"] = (None if free is None else
                                   _hindsight_cascade(table, report, free, free_arms))
    report["notes"] = [
        f"Graded log {log}: correct and cost as the log records them (usage priced from "
        "kgwise/data/prices.toml by arm name); questions graded on every --arm (coverage).",
        "Coke's priors are the --arm reported accuracies.",
        "hindsight_cascade (when the threshold router's cheap arm is a free KG model with signals) is a "
        "bound, not a router; .learned is a router on the free models' signals.",
    ] if log is not None else [
        "Correct = Hit: at least one gold answer in the arm's answer (ReaRev: Hits@1 of its top candidate).",
        "Questions: WebQSP test questions with gold names that every arm covers (GPT-4 only in gpt4_subset).",
        "Costs in US dollars from kgwise/data/prices.toml; tokens recorded for AoG, else ceil(chars/4) "
        "of the prompt and the answer; ReaRev (local GNN) costs $0.",
        "Coke's priors use each system's hit rate over its whole released file (its 'reported accuracy').",
        "The threshold router's classifier is cross-fitted (5 folds) on the same questions: an optimistic "
        "offline baseline, while Coke learns online from its own choices.",
        "hindsight_cascade is a bound, not a router: the free GNN answers when its own top score is high, "
        "else the strong arm does, with thresholds read off the evaluation questions themselves; "
        "hindsight_cascade.agreement ranks by the two free GNNs' agreement instead; "
        "hindsight_cascade.learned is a router: the threshold router's protocol on the free GNNs' signals.",
        "context_variants: Coke with the same settings, its LinUCB context being what the two free ReaRev "
        "GNNs say before any LLM is called ([1, agree, top score lmsr, top score sbert, agree * min score]; "
        "running both costs $0 here), alone or joined to the question embedding.",
        "price_paced_budget_sweep: Coke with pacing='price' (cost priced so that the budget goes to the "
        "questions where a paid arm gains most) and lambda = price_lam, the free arms' outcomes observed on "
        "every question (they answer it at $0); its settings are in price_paced_config.",
        "cross_tuned: price-paced Coke at 60 % of the best arm's cost, its gamma, reward decomposition and "
        "context chosen on one half of the questions and scored on the other (both ways); each half has "
        "half the questions to learn from. warm_held_out_accuracy: the same, the router first learning "
        "every arm's recorded outcomes on the tuning half (CokeRouter.warm_start), as the threshold "
        "router learns from the other folds.",
    ]
    if sensitivity:
        report["sensitivity"] = _sensitivity(table, X, cfg, seeds)
    if tune:
        from kgwise.eval.route.tuning import TuningConfig, cross_tune, warm_targets

        priced = replace(cfg.coke, lam=cfg.price_lam)  # as price_paced_budget_sweep runs it
        tuned = cross_tune(table, {"embedding": X, **contexts}, priced, TuningConfig(), seeds,
                           _progress_file(json_out, "tune"))
        report["cross_tuned"] = tuned
        report["targets"]["cross_tuned_warm_60"] = warm_targets(
            tuned, report["targets"]["best_arm_cost"], report["threshold_router"]["curve"])
    if gpt4:
        table8, coverage8 = webqsp_table(root, WEBQSP_ARMS)
        table8 = table8.head(limit)
        X8 = np.asarray(encoder.encode(list(table8.texts)), dtype=np.float64)
        sub = run_experiment(table8, X8, cfg, _progress_file(json_out, "gpt4"))
        sub["coverage"] = coverage8
        report["gpt4_subset"] = sub
    if json_out is not None and plots:
        figs = plot_all(report, json_out.with_suffix(""))
        if gpt4:
            figs += plot_all(report["gpt4_subset"], json_out.with_name(json_out.stem + "_gpt4"))
        report["figures"] = [str(f) for f in figs]
    write_json(report, json_out)


def _free_arms(table: Any) -> list[str]:
    """The table's free KG models (cluster KGM, no cost on any question), in table order."""
    return [a for j, a in enumerate(table.arms)
            if table.clusters[j] == "KGM" and not np.any(table.cost[:, j] > 0)]


def log_table(path: Path, specs: list[str]) -> tuple[Any, dict[str, Any], np.ndarray | None, list[str]]:
    """The outcome table of a graded log over the ``--arm`` specs, its coverage (questions some arm does
    not grade: counted and named), the free signals (:func:`~kgwise.route.table.free_signals`; ``None``
    when no arm has any) and the arms they come from."""
    from kgwise.datasets.user import read_graded_log
    from kgwise.llm.prices import default_prices
    from kgwise.route.table import OutcomeTable, free_signals, graded_coverage

    if not specs:
        raise ConfigError("--log needs --arm NAME:CLUSTER:ACCURACY for each arm to replay")
    arms = [_ArmSpec(*_arm_spec(s)) for s in specs]
    names = [a.name for a in arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"--arm given twice: {', '.join(twice)}")
    graded = read_graded_log(path)
    prices = default_prices()

    def cost_of(arm: str, usage: Any) -> float:
        price = prices.lookup(arm)
        if price is None:
            raise ConfigError(f"arm {arm!r}: the log gives usage, not cost, and {arm!r} is not in the price "
                              "table")
        return float(price.cost(usage.input_tokens, usage.output_tokens))

    table = OutcomeTable.from_graded_log(graded, arms, "$", cost_of)
    coverage: dict[str, Any] = {"log": str(path), **graded_coverage(graded, names)}
    left: int = coverage["left_out"]
    if left:
        err_console.print(f"[yellow]left out:[/yellow] {left} questions not graded on every arm: "
                          f"{', '.join(coverage['left_out_ids'][:10])}" + (", …" if left > 10 else ""))
    by_id = {q.id: q for q in graded.questions}
    with_signals = [a for a in table.arms if any(by_id[q].arms[a].signals for q in table.qids)]
    free = free_signals(graded, table) if with_signals else None
    return table, coverage, free, with_signals


@dataclass(frozen=True)
class _ArmSpec:
    name: str
    cluster: Cluster
    reported_accuracy: float | None


def _arm_spec(spec: str) -> tuple[str, Cluster, float | None]:
    """``NAME:CLUSTER[:REPORTED_ACCURACY]`` (the name may hold ':', read from the right)."""
    parts = spec.rsplit(":", 2)
    if len(parts) == 3 and parts[1] not in ("KGM", "LLM"):
        parts = [f"{parts[0]}:{parts[1]}", parts[2]]
    if len(parts) < 2 or not parts[0] or parts[1] not in ("KGM", "LLM"):
        raise ConfigError(f"--arm {spec!r}: expected NAME:CLUSTER[:REPORTED_ACCURACY], CLUSTER = KGM or LLM")
    try:
        reported = float(parts[2]) if len(parts) == 3 else None
    except ValueError as exc:
        raise ConfigError(f"--arm {spec!r}: reported accuracy {parts[2]!r} is not a number") from exc
    return parts[0], parts[1], reported  # type: ignore[return-value]


def _hindsight_cascade(table: Any, report: dict[str, Any], signals: np.ndarray, free_arms: list[str]
                       ) -> dict[str, Any] | None:
    """Cascades between the threshold router's two arms, where the cheap arm is one of the free KG models
    whose ``signals`` are ``[agree, s_1 … s_k, agree · min s]`` (``free_arms``, in that order; see
    :func:`~kgwise.route.table.free_signals`): two hindsight bounds (its own top score; the free models'
    agreement) and a cascade router that learns escalation from the signals, cross-fitted like the
    threshold router."""
    from kgwise.eval.route.baselines import accuracy_at_cost, hindsight_cascade, threshold_curve

    cheap, strong = report["threshold_router"]["cheap_arm"], report["threshold_router"]["strong_arm"]
    if cheap not in free_arms or signals.shape[1] != len(free_arms) + 2:
        return None
    i, j = table.arm_index(cheap), table.arm_index(strong)
    cheap_ok, strong_ok, strong_cost = table.correct[:, i], table.correct[:, j], table.cost[:, j]
    budget = 0.6 * float(np.sum(strong_cost))
    agreement = signals[:, 0] + signals[:, -1]  # agreeing questions first, then by the smaller score

    def entry(confidence: str, curve: list[dict[str, float]]) -> dict[str, Any]:
        return {"confidence": confidence, "curve": curve,
                "accuracy_at_60pct_of_strong_cost": accuracy_at_cost(curve, budget)}

    own_score = signals[:, 1 + free_arms.index(cheap)]  # the cheap model's own top score
    own = hindsight_cascade(own_score, cheap_ok, strong_ok, strong_cost)
    return {
        "cheap_arm": cheap, "strong_arm": strong,
        **entry(f"{cheap}'s top-candidate score", own),
        "agreement": entry(f"the free models ({', '.join(free_arms)}) put the same answer on top, then the "
                           "smaller top score",
                           hindsight_cascade(agreement, cheap_ok, strong_ok, strong_cost)),
        "learned": entry("cross-fitted logistic regression on the free models' signals (agreement, top "
                         "scores) — a router, like threshold_router",
                         threshold_curve(signals, cheap_ok, strong_ok, table.cost[:, i], strong_cost)),
    }


@bench_app.command("route")
@friendly_errors
def bench_route_cmd(
    arms: Annotated[int, typer.Option(min=1, help="Number of arms.")] = 8,
    dim: Annotated[int, typer.Option(min=1, help="Embedding dimension.")] = 384,
    steps: Annotated[int, typer.Option(min=1, help="Questions timed for Coke and LinUCB.")] = 2000,
    naive_steps: Annotated[int, typer.Option(min=1, help="Questions timed for the naive LinUCB.")] = 100,
    json_out: JsonOption = None,
) -> None:
    """Coke select + update per question vs a naive matrix-inverse LinUCB (same run, ratio)."""
    from kgwise.eval.bench.route import bench_route

    write_json(bench_route(arms, dim, steps, naive_steps), json_out)


def _live_arms(specs: list[str], open_kg: Callable[[], Any], root: Path | None, scoring: ScoringRule
                ) -> tuple[list[Any], dict[str, int]]:
    """Arms from specs: ``kgm:PATH`` (a saved KG model; ``root``: the data directory its KG may need),
    ``NAME`` (a local LLM scoring the choices), ``NAME+kg`` (the same LLM with KnowGPT knowledge injection
    over the graph ``open_kg()`` returns: P_sub + triples format). LLM arms rank the choices by ``scoring``
    and are named ``SPEC/RULE``, so outcomes of another rule are not reused."""
    from kgwise.eval.route.live import AnswerFnPredictor
    from kgwise.inject import InjectorConfig
    from kgwise.llm import get_llm
    from kgwise.llm.answering import METHOD_OF_RULE, MCConfig, answer_mc
    from kgwise.route.arms import Arm

    arms: list[Any] = []
    params: dict[str, int] = {}
    llms: dict[str, Any] = {}
    injector_parts: dict[str, Any] = {}
    for spec in specs:
        if spec.startswith("kgm:"):
            from kgwise.kgm.predictor import KGMPredictor

            kgm = KGMPredictor.load(spec[4:], root)
            arms.append(Arm(f"KGM:{Path(spec[4:]).stem}", "KGM", AnswerFnPredictor(kgm.answer)))
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
            arms.append(Arm(label, "LLM", AnswerFnPredictor(answer), per_call=1.0))
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
        arms.append(
            Arm(
                label,
                "LLM",
                AnswerFnPredictor(partial(injector.answer, combo=Combination("P_sub", "F_t"))),
                per_call=1.0,
            )
        )
    return arms, params


@eval_app.command("route-live")
@friendly_errors
def eval_route_live(
    arm: Annotated[
        list[str],
        typer.Option(
            "--arm", help="An arm: kgm:PATH, an LLM short name, or NAME+kg (knowledge injection). Repeat."
        ),
    ],
    dataset: Annotated[str | None, typer.Option(
        help="Multiple-choice data set (csqa, obqa, medqa; default obqa), or --questions FILE.",
        show_default=False)] = None,
    split: Annotated[str | None, typer.Option(help="Split of --dataset (default test).", show_default=False)
                     ] = None,
    questions_file: Annotated[Path | None, typer.Option(
        "--questions", help="Your labelled multiple-choice questions (JSONL: id, text, choices, gold | "
        "answer) instead of --dataset/--split; NAME+kg arms then need --kg.", exists=True, dir_okay=False)
    ] = None,
    kg: Annotated[Path | None, typer.Option(
        "--kg", help="With --questions: the graph file NAME+kg arms inject knowledge from (a --dataset "
        "brings its own KG).")] = None,
    limit: Annotated[int, typer.Option(min=0, help="First N questions (0 = all).")] = 100,
    budget_fraction: Annotated[float, typer.Option(
        help="Budget B as a fraction of the cost of always calling the most expensive arm (here: an LLM "
             "on every question; the report gives the amount it comes to, in calls, as 'budget').")] = 1.0,
    lam: Annotated[float | None, typer.Option(
        "--lambda", help="λ of the cost regret (default: the --config's, else 1).", show_default=False)
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Question orders.")] = 10,
    scoring: Annotated[str, typer.Option(
        help="How LLM arms rank the choices: sum or per-token mean of log-probabilities, or pmi (the sum "
        "minus the choice's context-free log-probability; a tiny model's sum is below chance on OBQA).")
    ] = "pmi",
    config: ConfigOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Coke's local setting: live arms answer every question once (cost = LLM calls), then the replay
    experiment runs on their outcomes. Outcomes are saved next to the JSON and resumed."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.datasets import load
    from kgwise.embed import MiniLM
    from kgwise.eval.route.experiment import ExperimentConfig, run_experiment
    from kgwise.eval.route.live import collect_outcomes
    from kgwise.eval.route.plots import plot_all
    from kgwise.files import short_hash
    from kgwise.settings import configured

    twice = sorted({a for a in arm if arm.count(a) > 1})
    if twice:
        raise ConfigError(f"--arm given twice: {', '.join(twice)} (arm names must be unique)")
    root: Path | None
    if questions_file is not None:
        if dataset is not None or split is not None:
            raise ConfigError("give --questions FILE or --dataset/--split, not both")
        injected = [a for a in arm if a.endswith("+kg")]
        if injected and kg is None:
            raise ConfigError(f"--arm {injected[0]} injects KG knowledge: with --questions it needs --kg "
                              "GRAPH (a --dataset brings its own KG)")
        from kgwise.datasets.user import read_questions
        from kgwise.files import file_stamp
        from kgwise.kg.loaders import open_graph_file

        distinct_outputs({"--json": json_out}, {"--questions": questions_file, "--kg": kg})
        questions = read_questions(questions_file)
        unusable = [q.ref for q in questions if not q.choices or q.gold_index is None]
        if unusable:
            raise ConfigError(f"{questions_file}: {len(unusable)} question(s) without choices or a gold "
                              f"answer ({listed(unusable)}); the arms are graded on labelled multiple-choice "
                              "questions")
        root = data

        def open_kg() -> Any:
            return open_graph_file(kg) if kg is not None else None

        stamp: dict[str, Any] = {"questions": file_stamp(questions_file),
                                 "kg": file_stamp(kg) if kg is not None else None}
        dataset, split = questions_file.stem, "file"
    else:
        if kg is not None:
            raise ConfigError("--kg goes with --questions FILE (a --dataset brings its own KG)")
        from kgwise.kg.benchmarks import benchmark_kg

        dataset, split = dataset or "obqa", split or "test"
        root = data_dir(data)
        questions = load(dataset, split, root)
        name, where = dataset, root

        def open_kg() -> Any:
            return benchmark_kg(name, where)

        stamp = {"dataset": dataset, "split": split}
    if limit > 0:
        questions = questions[:limit]
    arms, params = _live_arms(arm, open_kg, root, scoring_rule(scoring))
    outcomes = None if json_out is None else json_out.with_name(f"{json_out.stem}.outcomes.jsonl")
    table, totals = collect_outcomes(arms, questions, outcomes, params, fingerprint=short_hash(stamp))
    X = np.asarray(MiniLM().encode(list(table.texts)), dtype=np.float64)
    cfg = ExperimentConfig(budget_fraction=budget_fraction, seeds=seeds,
                           coke=configured("coke", config, lam=lam))
    report = run_experiment(table, X, cfg, _progress_file(json_out, "live"))
    report["live_arms"] = totals
    report["setup"] |= {"dataset": dataset, "split": split, "limit": limit, "arm_specs": arm,
                        "scoring": scoring}
    if json_out is not None:
        report["figures"] = [str(f) for f in plot_all(report, json_out.with_suffix(""))]
    write_json(report, json_out)
