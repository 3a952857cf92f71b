"""``kgwise eval route`` (routers and baselines replayed on a graded log, or on WebQSP's recorded arms
through the same door), ``kgwise eval route-live`` (live arms answer, then the same replay) and ``kgwise
bench route`` (router speed): parse → :mod:`kgwise.eval.route` → print."""

from __future__ import annotations

import os
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
    write_json,
)
from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.llm.base import scoring_rule


def _progress_file(out: Path | None, tag: str) -> Path | None:
    return None if out is None else out.with_name(f"{out.stem}.{tag}.runs.jsonl")


BudgetOfOption = Annotated[str, typer.Option(
    help="Arm whose total cost --budget-fraction is a fraction of: 'dearest' (the most expensive, the "
    "paper's convention) or 'best' (the most accurate).")]


@eval_app.command("route")
@friendly_errors
def eval_route(
    dataset: Annotated[str, typer.Option(help="Replay data set (recorded outcomes): webqsp.")] = "webqsp",
    budget_fraction: Annotated[float, typer.Option(
        help="Budget B as a fraction of the cost of always calling the --budget-of arm (the report gives "
             "the amount it comes to as 'budget').")] = 1.0,
    budget_of: BudgetOfOption = "dearest",
    lam: Annotated[float | None, typer.Option(
        "--lambda", help="λ, weight of the cost regret (Eq. 2) (default: the --config's, else 1).",
        show_default=False)] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Question orders (mean ± std over them).")] = 10,
    splits: Annotated[int, typer.Option(
        min=1, help="Random halvings (fit on one, test on the other) for the learned routers.")] = 5,
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
    learned: Annotated[bool, typer.Option(
        help="Also the routers that start from a learned success predictor, and the one cross-fitting "
             "selects, over --splits halvings.")] = True,
    slow_baselines: Annotated[bool, typer.Option(
        help="Run mabwiser's LinUCB, Coke's ablations and the λ and budget sweeps (most of the time).")
    ] = True,
    plots: Annotated[bool, typer.Option(help="Save the figures next to the JSON.")] = True,
    log: GradedLogOption = None,
    log_arms: LogArmsOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Coke vs single arms, random, oracle, ablations, threshold router, mabwiser, cascades and learned
    routers on recorded outcomes (your graded log's, or WebQSP's through the same reader)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.embed import MiniLM
    from kgwise.eval.route.experiment import RouteExperimentConfig
    from kgwise.eval.route.learned import LearnedConfig
    from kgwise.eval.route.logs import read_replay, webqsp_replay
    from kgwise.eval.route.plots import plot_all
    from kgwise.eval.route.replay import WEBQSP_ARMS
    from kgwise.eval.route.report import RouteReportConfig, route_report
    from kgwise.settings import configured

    if log is None and log_arms:
        raise ConfigError("--arm goes with --log FILE (WebQSP's arms are known)")
    if log is None and dataset != "webqsp":
        raise ConfigError(f"replay data set {dataset!r} has no recorded outcomes (only 'webqsp' has): give "
                          "your graded log with --log FILE --arm NAME:CLUSTER:ACCURACY …")
    exp = RouteExperimentConfig(budget_fraction=budget_fraction, seeds=seeds, budget_of=budget_of,
                           slow_baselines=slow_baselines, coke=configured(
        "coke", config, lam=lam, delta=delta, regret_prior=regret_prior, gamma_override=gamma))
    root = data_dir(data) if log is None else None
    replay = read_replay(log, log_arms or []) if log is not None else webqsp_replay(data_dir(data))
    replay = replay.head(limit)
    sub = webqsp_replay(root, WEBQSP_ARMS).head(limit) if root is not None and gpt4 else None
    err_console.print(f"{replay.table.n_questions} questions × {replay.table.n_arms} arms; embedding "
                      "questions …")
    report = route_report(replay, MiniLM(), RouteReportConfig(exp, sensitivity, tune, learned,
                                                               LearnedConfig(splits=splits)),
                          is_log=log is not None, progress_file=lambda tag: _progress_file(json_out, tag),
                          gpt4=sub)
    report["limit"] = limit
    if json_out is not None and plots:
        figs = plot_all(report, json_out.with_suffix(""))
        if sub is not None:
            figs += plot_all(report["gpt4_subset"], json_out.with_name(json_out.stem + "_gpt4"))
        report["figures"] = [str(f) for f in figs]
    write_json(report, json_out)


@bench_app.command("route")
@friendly_errors
def bench_route_cmd(
    arms: Annotated[int, typer.Option(min=1, help="Number of arms.")] = 8,
    dim: Annotated[int, typer.Option(min=1, help="Embedding dimension.")] = 384,
    steps: Annotated[int, typer.Option(min=1, help="Questions timed for Coke and LinUCB.")] = 2000,
    naive_steps: Annotated[int, typer.Option(min=1, help="Questions timed for the naive LinUCB.")] = 100,
    json_out: JsonOption = None,
) -> None:
    """Coke select + update per question vs a naive matrix-inverse LinUCB (same run, ratio), price-paced
    Coke vs a price that scores every arm of every recent question (same run, ratio, same prices), and the
    learned router's decision (success predictor + priced argmax)."""
    from kgwise.eval.bench.route import bench_route

    write_json(bench_route(arms, dim, steps, naive_steps), json_out)


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
    from kgwise.eval.route.experiment import RouteExperimentConfig, run_experiment
    from kgwise.eval.route.live import collect_outcomes, live_arms
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
        from kgwise.datasets.user import read_labelled_mc
        from kgwise.files import file_stamp
        from kgwise.kg.loaders import open_graph_file

        distinct_outputs({"--json": json_out}, {"--questions": questions_file, "--kg": kg})
        questions = read_labelled_mc(questions_file, "the arms are graded on labelled multiple-choice "
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
    arms, params = live_arms(arm, open_kg, root, scoring_rule(scoring))
    outcomes = None if json_out is None else json_out.with_name(f"{json_out.stem}.outcomes.jsonl")
    table, totals = collect_outcomes(arms, questions, outcomes, params, fingerprint=short_hash(stamp))
    X = np.asarray(MiniLM().encode(list(table.texts)), dtype=np.float64)
    cfg = RouteExperimentConfig(budget_fraction=budget_fraction, seeds=seeds,
                           coke=configured("coke", config, lam=lam))
    report = run_experiment(table, X, cfg, _progress_file(json_out, "live"))
    report["live_arms"] = totals
    report["setup"] |= {"dataset": dataset, "split": split, "limit": limit, "arm_specs": arm,
                        "scoring": scoring}
    if json_out is not None:
        report["figures"] = [str(f) for f in plot_all(report, json_out.with_suffix(""))]
    write_json(report, json_out)
