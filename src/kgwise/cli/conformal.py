"""``kgwise eval uag`` (UAG and baselines on WebQSP or on your own labelled questions), ``kgwise bench
conformal`` (LTT calibration speed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kgwise.cli.apps import bench_app, eval_app
from kgwise.cli.common import DataOption, JsonOption, comma_list, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError


@eval_app.command("uag")
@friendly_errors
def eval_uag(
    dataset: Annotated[str | None, typer.Option(
        help="A benchmark with recorded generations and candidates: webqsp (the default without "
             "--questions).")] = None,
    questions: Annotated[Path | None, typer.Option(
        help="Your labelled open questions (JSONL: id, text, gold, topic_entities) instead of --dataset.")
    ] = None,
    kg: Annotated[str | None, typer.Option(help="The KG of --questions (a graph file, e.g. a TSV of "
                                          "head, relation, tail).")] = None,
    generations: Annotated[Path | None, typer.Option(
        help="Recorded Φ(P) of --questions (JSONL: id, answer); or --llm.")] = None,
    candidates: Annotated[Path | None, typer.Option(
        help="A scored retriever's candidates of --questions (JSONL: id, candidates [[name_or_id, score], "
             "…], gold?); needed by uag_gnn, split_cp and top_k.")] = None,
    alphas: Annotated[str, typer.Option(help="Comma-separated risk levels α.")
                      ] = "0.1,0.15,0.2,0.3,0.35,0.4,0.45,0.5",
    splits: Annotated[int, typer.Option(min=1, help="Random tuning/calibration/test splits.")] = 20,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the first split.")] = 0,
    tune_fraction: Annotated[float, typer.Option(
        help="Share of the questions that picks λ among the valid ones (smallest mean set).")] = 0.2,
    cal_fraction: Annotated[float, typer.Option(
        help="Share of the questions for Learn-then-Test; the rest is the test split.")] = 0.5,
    steps: Annotated[str, typer.Option(help="Grid steps h for (α1, α2, α3).")] = "0.05,0.05,0.025",
    gnn_step: Annotated[float, typer.Option(
        help="Grid step of α4 (the GNN's candidates) for uag_gnn; fixed-sequence LTT pays nothing for a "
             "finer grid.")] = 0.01,
    delta: Annotated[float, typer.Option(help="LTT confidence parameter δ.")] = 0.05,
    metric: Annotated[str, typer.Option(help="S1: cosine (UAG) or l1 (ablation).")] = "cosine",
    gnn: Annotated[str, typer.Option(help="rearev-sbert or rearev-lmsr (baseline candidates, generations).")
                   ] = "rearev-sbert",
    granularity: Annotated[str, typer.Option(help="Eq. 6 against: whole, items, both (min).")
                           ] = "whole",
    max_hops: Annotated[int, typer.Option(min=1, help="Longest relation path retrieved.")] = 2,
    direction: Annotated[str, typer.Option(help="Edges a hop may follow: out, in or both.")] = "out",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions (smoke runs).")] = None,
    llm: Annotated[str | None, typer.Option(help="Generate Φ(P) live with this kgwise LLM spec (e.g. "
                                                "smollm2-135m) instead of RoG's recorded answers.")] = None,
    jobs: Annotated[int, typer.Option(help="Splits run at once in worker processes (-1: one per core); "
                                           "the results do not depend on it.")] = 1,
    methods: Annotated[str | None, typer.Option(
        help="Comma-separated methods to run (default all): uag, uag_bonferroni, uag_top_p, uag_eq6, "
             "uag_learned, uag_gnn, split_cp, top_k.")] = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """ECR, APSS and Hits@1 of UAG (guaranteed and top-p), split CP and Top-K per α; Table 6 and Fig. 3
    (the paper's rows on WebQSP only)."""
    from kgwise.eval.uag.experiment import (
        RetrieverConfig,
        UAGExperimentConfig,
        load_user_data,
        load_webqsp_data,
        markdown_table,
        reachability_advice,
        run_experiment,
        sample_size_advice,
    )
    from kgwise.eval.uag.plots import plot_report

    own = {"--kg": kg, "--generations": generations, "--candidates": candidates}
    if questions is None:
        given = [k for k, v in own.items() if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --questions FILE")
        if (dataset or "webqsp") != "webqsp":
            raise ConfigError(f"no recorded generations for --dataset {dataset!r} (only webqsp has them): "
                              "give your questions: --questions FILE --kg G --generations FILE (or --llm)")
    else:
        if dataset is not None:
            raise ConfigError("give --dataset or --questions, not both")
        if kg is None:
            raise ConfigError("--questions needs --kg (the KG the questions are asked over)")
        if (generations is None) == (llm is None):
            raise ConfigError("--questions needs exactly one of --generations FILE (recorded Φ(P)) and --llm")
    cfg = UAGExperimentConfig(alphas=comma_list(alphas, "--alphas", float), splits=splits, seed=seed,
                           tune_fraction=tune_fraction, cal_fraction=cal_fraction,
                           steps=_steps(steps), gnn_step=gnn_step, delta=delta, gnn=gnn,
                           metric=metric, granularity=granularity, limit=limit, llm=llm,
                           retriever=RetrieverConfig(max_hops=max_hops, direction=direction),  # type: ignore[arg-type]
                           **({} if methods is None else {"methods": tuple(
                               m.strip() for m in methods.split(",") if m.strip())}))
    out_dir = json_out.parent if json_out is not None else None
    runs = out_dir / f"{json_out.stem}_runs" if out_dir is not None and json_out is not None else None
    if questions is None:
        inputs = load_webqsp_data(data_dir(data), gnn, limit)
    else:
        assert kg is not None
        inputs = load_user_data(questions, kg, generations, candidates, limit)
        if candidates is None:
            err_console.print("no --candidates: uag_gnn, split_cp and top_k need a scored "
                              "retriever and are not run")
    _say_left_out(inputs.coverage)
    n = len(inputs.questions)
    for line in sample_size_advice(round(cfg.cal_fraction * n), cfg.alphas, cfg.delta):
        err_console.print(f"calibration split: {line}")
    report = run_experiment(inputs, cfg, out_dir=runs,
                            on_split=lambda s: err_console.print(f"split {s + 1}/{cfg.splits} done"),
                            jobs=jobs)
    table = markdown_table(report, cfg.alphas, paper=inputs.paper == "webqsp")
    advice = reachability_advice(report["meta"]["gold_retrievable"], cfg.alphas, cfg.retriever)
    if advice:
        err_console.print(f"[yellow]warning:[/yellow] {advice}")
    report["table6_markdown"] = table
    if json_out is not None:
        stem = json_out.stem
        report["plots"] = [str(p) for p in plot_report(report, cfg.alphas, json_out.parent, stem)]
        (json_out.parent / f"{stem}_table6.md").write_text(table + "\n", encoding="utf-8")
    err_console.print(table)
    for method, t in report["targets"].items():
        misses = [a for a, r in t["per_alpha"].items() if r["ecr_ge_1_minus_alpha"] is not True]
        err_console.print(f"{method}: targets {'met' if t['met'] else 'not met'}"
                          + (f" (ECR < 1 − α or no set at α = {', '.join(misses)})" if misses else ""))
    write_json(report, json_out)


def _steps(text: str) -> tuple[float, float, float]:
    """``--steps``: the grid steps h of (α1, α2, α3), three comma-separated numbers."""
    step = comma_list(text, "--steps", float)
    if len(step) != 3:
        raise ConfigError("--steps needs three values (α1, α2, α3)")
    return step[0], step[1], step[2]


def _say_left_out(coverage: dict[str, Any]) -> None:
    """Print every group of questions the inputs leave out: how many, why, the first ids."""
    for group in ("left_out", "kept_anyway"):
        for entry in coverage.get(group, {}).values():
            if entry["count"]:
                more = ", …" if entry["count"] > len(entry["first"]) else ""
                err_console.print(f"[yellow]{group.replace('_', ' ')}:[/yellow] {entry['count']} "
                                  f"({entry['why']}): {', '.join(entry['first'])}{more}")


@bench_app.command("conformal")
@friendly_errors
def bench_conformal(
    n_questions: Annotated[int | None, typer.Option(
        "--n-questions", min=1, help="Calibration questions (default: 1000 of WebQSP or synthetic; all of "
        "--questions).", show_default=False)] = None,
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Time UAG's calibration on your labelled open questions (JSONL: id, text, gold, "
        "topic_entities) with --kg and --generations instead of WebQSP's (the count is --n-questions).")
    ] = None,
    kg: Annotated[str | None, typer.Option(help="With --questions: their graph file.")] = None,
    generations: Annotated[Path | None, typer.Option(
        help="With --questions: the LLM's recorded answers Φ(P) (JSONL: id, answer).")] = None,
    steps: Annotated[str, typer.Option(help="Grid steps h for (α1, α2, α3).")] = "0.05,0.05,0.025",
    alpha: Annotated[float, typer.Option(help="Risk level α.")] = 0.2,
    baseline_sample: Annotated[int, typer.Option(min=1, help="λ timed for the per-λ loop baseline.")] = 200,
    synthetic: Annotated[bool, typer.Option(help="Synthetic tables instead of WebQSP's.")] = False,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Time LTT calibration over the full λ grid (vectorised; best of 3 after a warm-up call whose time,
    imports included, is reported too) against a per-λ loop in the same run."""
    from kgwise.eval.bench.conformal import bench_calibration, synthetic_tables
    from kgwise.eval.uag.experiment import UAGExperimentConfig, webqsp_tables

    step = _steps(steps)
    if questions is not None:
        if not questions.is_file():
            hint = (" (--questions is the questions file now; the number of calibration questions is "
                    "--n-questions)" if questions.name.isdigit() else "")
            raise ConfigError(f"--questions {questions}: no such file{hint}")
        if synthetic:
            raise ConfigError("give --questions FILE or --synthetic, not both")
        if kg is None or generations is None:
            raise ConfigError("--questions needs --kg GRAPH (WebQSP brings its own) and --generations FILE")
        batch = _own_tables(questions, kg, generations)
    else:
        given = [o for o, v in (("--kg", kg), ("--generations", generations)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --questions FILE")
        if synthetic:
            batch = synthetic_tables((n_questions or 1000) + 400)
        else:
            batch = webqsp_tables(data_dir(data), UAGExperimentConfig())
            if batch.num_questions < (n_questions or 1000):
                raise ConfigError(f"WebQSP has {batch.num_questions} questions, fewer than --n-questions "
                                  f"{n_questions or 1000}")
    n_cal = n_questions or (batch.num_questions if questions is not None else 1000)
    if n_cal > batch.num_questions:
        raise ConfigError(f"--n-questions {n_cal}: the tables hold {batch.num_questions} questions")
    name = str(questions) if questions is not None else "synthetic" if synthetic else "webqsp"
    write_json(bench_calibration(batch, n_cal, alpha, step, baseline_sample, name),
               json_out)


def _own_tables(questions: Path, kg: str, generations: Path) -> Any:
    """UAG tables of a user's questions, KG and recorded generations (as ``eval uag --questions`` builds
    them, with its default retriever)."""
    from kgwise.eval.uag.experiment import UAGExperimentConfig, load_user_data, uag_tables

    inputs = load_user_data(questions, kg, generations, None, None)
    _say_left_out(inputs.coverage)
    return uag_tables(inputs, UAGExperimentConfig())
