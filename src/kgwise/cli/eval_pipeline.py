"""``kgwise eval pipeline``: the pipeline end to end on recorded arms (issue 27 item 6a)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import ConfigOption, DataOption, JsonOption, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError


@eval_app.command("pipeline")
@friendly_errors
def eval_pipeline(
    dataset: Annotated[str, typer.Option(help="Replay data set (recorded outcomes): webqsp.")] = "webqsp",
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
    context: Annotated[str, typer.Option(
        help="The config's [router] context: 'question' or 'question+free' (the free ReaRev GNNs' top "
        "candidates and scores joined to the question); `kgwise fit` replaces it by cross-fitting when the "
        "fit half is large enough.")] = "question",
    limit: Annotated[int | None, typer.Option(min=4, help="Only the first N questions (a quick look).")
                     ] = None,
    config: ConfigOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """The pipeline (fit → answer → feedback) on recorded WebQSP arms: per arm and pipeline accuracy, cost,
    share routed and spent/budget, mean ± std over random splits."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.app.config import CONTEXTS, paced_coke
    from kgwise.embed import MiniLM
    from kgwise.eval.pipeline import PipelineEvalConfig, embed_texts, evaluate_replay
    from kgwise.eval.route.replay import MAIN_ARMS, rearev_top, webqsp_table
    from kgwise.settings import configured

    if dataset != "webqsp":
        raise ConfigError(f"replay data set {dataset!r} has no recorded outcomes; only 'webqsp' is available")
    if context not in CONTEXTS:
        raise ConfigError(f"--context must be one of {', '.join(CONTEXTS)}, got {context!r}")
    root = data_dir(data)
    table, _ = webqsp_table(root, MAIN_ARMS)
    table = table.head(limit)
    free = {a: rearev_top(root, table, a) for a in table.arms if a.startswith("ReaRev-")}
    if coke not in ("pipeline", "settings"):
        raise ConfigError(f"--coke must be 'pipeline' or 'settings', got {coke!r}")
    settings_coke = configured("coke", config)
    cfg = PipelineEvalConfig(budget, splits, seed,
                             paced_coke(settings_coke) if coke == "pipeline" else settings_coke, budget_of,
                             context)
    encoder = MiniLM()
    err_console.print(f"{table.n_questions} questions × {table.n_arms} arms; embedding questions …")
    embed_texts(encoder, table.texts)
    report = evaluate_replay(table, encoder, cfg, progress=err_console.print, free=free)
    report["dataset"] = dataset
    write_json(report, json_out)


__all__ = ["eval_pipeline"]
