"""``kgwise eval pipeline``: the pipeline end to end on recorded arms (issue 27 item 6a)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import ConfigOption, DataOption, JsonOption, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError


@eval_app.command("pipeline")
@friendly_errors
def eval_pipeline(
    dataset: Annotated[str, typer.Option(help="Replay data set (recorded outcomes): webqsp; or --log FILE.")
                       ] = "webqsp",
    log: Annotated[Path | None, typer.Option(
        "--log", exists=True, dir_okay=False,
        help="Your graded log (JSONL: id, text, arms: {ARM: {answer, correct, cost | usage, signals?}}) "
             "instead of --dataset; with --arm for each arm to replay.")] = None,
    log_arms: Annotated[list[str] | None, typer.Option(
        "--arm", help="With --log: NAME:CLUSTER:REPORTED_ACCURACY (CLUSTER = KGM or LLM) of an arm of the "
                      "log; repeat per arm.")] = None,
    budget: Annotated[float, typer.Option(
        min=0.0, help="Budget: fraction of the cost of always calling the most expensive arm on the test "
        "half (see --budget-of).")] = 1.0,
    budget_of: Annotated[str, typer.Option(
        help="Arm whose cost on the test half the budget is a fraction of: 'dearest' (the most expensive) "
        "or 'best' (the most accurate).")] = "dearest",
    coke: Annotated[str, typer.Option(
        help="Router values: 'pipeline' (the pipeline's defaults for a paced budget over the [coke] "
        "settings, as `kgwise fit` with a horizon gets them) or 'settings' (the [coke] settings alone).")
                    ] = "pipeline",
    splits: Annotated[int, typer.Option(min=1, help="Random halvings (fit on one half, test on the other).")
                      ] = 10,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    limit: Annotated[int | None, typer.Option(min=4, help="Only the first N questions (a quick look).")
                     ] = None,
    config: ConfigOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """The pipeline (fit → answer → feedback) on recorded arms (WebQSP's, or your graded log's): per arm and
    pipeline accuracy, cost, share routed and spent/budget, mean ± std over random splits."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.app.config import paced_coke
    from kgwise.embed import MiniLM
    from kgwise.eval.pipeline import PipelineEvalConfig, embed_texts, evaluate_replay
    from kgwise.eval.route.replay import MAIN_ARMS, webqsp_table
    from kgwise.settings import configured

    if log is not None:
        from kgwise.cli.route import log_table

        table, coverage, _, _ = log_table(log, log_arms or [])
        dataset = log.stem
    elif log_arms:
        raise ConfigError("--arm goes with --log FILE (WebQSP's arms are known)")
    elif dataset != "webqsp":
        raise ConfigError(f"replay data set {dataset!r} has no recorded outcomes (only 'webqsp' has): give "
                          "your graded log with --log FILE --arm NAME:CLUSTER:ACCURACY …")
    else:
        table, coverage = webqsp_table(data_dir(data), MAIN_ARMS)
    table = table.head(limit)
    if coke not in ("pipeline", "settings"):
        raise ConfigError(f"--coke must be 'pipeline' or 'settings', got {coke!r}")
    settings_coke = configured("coke", config)
    cfg = PipelineEvalConfig(budget, splits, seed,
                             paced_coke(settings_coke) if coke == "pipeline" else settings_coke, budget_of)
    encoder = MiniLM()
    err_console.print(f"{table.n_questions} questions × {table.n_arms} arms; embedding questions …")
    embed_texts(encoder, table.texts)
    report = evaluate_replay(table, encoder, cfg, progress=err_console.print)
    report["dataset"] = dataset
    report["coverage"] = coverage
    write_json(report, json_out)


__all__ = ["eval_pipeline"]
