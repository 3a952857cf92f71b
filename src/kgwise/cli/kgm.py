"""``kgwise kg model train`` and ``kgwise eval kgm``: the small KG models (Coke's cheap arms). A trained
model answers as a pipeline arm (``kgwise init --arm NAME=kgm:MODEL``, then ``kgwise ask``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import eval_app, kg_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    distinct_outputs,
    err_console,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.errors import ConfigError

kgm_app = typer.Typer(
    help="Small KG-based QA models, a pipeline's `kgm` arms (evaluate with `kgwise eval kgm`).",
    no_args_is_help=True)
kg_app.add_typer(kgm_app, name="model")


def _log(message: str) -> None:
    err_console.print(message)


@kgm_app.command("train")
@friendly_errors
def train(
    out: Annotated[
        Path, typer.Option(help="Weights file; the JSON config is written beside it (FILE.json).",
                           callback=writable)
    ],
    dataset: Annotated[str | None, typer.Option(
        help="csqa (ihtrain, early stop on ihdev) or obqa (train, dev); or --questions FILE --kg GRAPH.")
    ] = None,
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Your labelled multiple-choice training questions (JSONL: id, text, choices, "
        "gold | answer) instead of --dataset; needs --kg.", exists=True, dir_okay=False)] = None,
    dev_questions: Annotated[Path | None, typer.Option(
        "--dev-questions", help="With --questions: the questions early stopping scores (default: a seeded "
        "fifth of --questions, held out of training).", exists=True, dir_okay=False)] = None,
    kg: Annotated[Path | None, typer.Option(
        "--kg", help="With --questions: the graph file the model reads (a --dataset brings its own KG).")
    ] = None,
    kind: Annotated[str | None, typer.Option(
        help="graph (GNN over the subgraph) or text (no-graph baseline) (default: the --config's, else "
             "graph).", show_default=False)] = None,
    epochs: Annotated[int | None, typer.Option(
        min=1, help="Most epochs (default: the --config's, else 20).", show_default=False)] = None,
    max_minutes: Annotated[float | None, typer.Option(
        min=0.01, help="Wall-clock cap on training, in minutes (default: the --config's, else 60).",
        show_default=False)
    ] = None,
    seed: Annotated[int | None, typer.Option(
        min=0, help="Random seed (default: the --config's, else 0).", show_default=False)] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Use only the first N questions of each split.")] = None,
    reserve: Annotated[str | None, typer.Option(
        help="START:STOP — with --dataset: leave training-split questions START to STOP-1 out of training, "
             "unseen, to fit a pipeline on (`kgwise eval pipeline --live` picks them).",
        show_default=False)] = None,
    config: ConfigOption = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Build (or reuse) the cached features, train, early-stop on dev, save the model; sizes and
    optimisation from the kgm_model and kgm_train tables of --config."""
    from kgwise.app.kg_model import config_path, train, training_data

    distinct_outputs({"--out": out, "--out's config": config_path(out), "--json": json_out},
                     {"--config": config, "--questions": questions, "--dev-questions": dev_questions,
                      "--kg": kg})
    reserved = _span(reserve, "--reserve")
    if reserved is not None and questions is not None:
        raise ConfigError("--reserve goes with --dataset; leave the questions to keep unseen out of your "
                          "--questions file instead")
    training = training_data(dataset, questions, dev_questions, kg, seed or 0, _log)
    write_json(train(training, out, config, kind=kind, seed=seed, epochs=epochs, max_minutes=max_minutes,
                     limit=limit, reserve=reserved, data=data, log=_log), json_out)


def _span(text: str | None, option: str) -> tuple[int, int] | None:
    """``"START:STOP"`` as two integers (``ConfigError`` naming ``option`` otherwise)."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ConfigError(f"{option} must be START:STOP (two whole numbers), got {text!r}")
    return int(parts[0]), int(parts[1])


@eval_app.command("kgm")
@friendly_errors
def eval_kgm(
    model: Annotated[Path, typer.Option(help="A model file written by `kgwise kg model train`.")],
    dataset: Annotated[str | None, typer.Option(help="Dataset name (csqa, obqa); or --questions FILE.")
                       ] = None,
    split: Annotated[list[str] | None, typer.Option(
        help="Split(s) of --dataset to evaluate, e.g. ihtest (repeatable).")] = None,
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Your labelled multiple-choice questions (JSONL: id, text, choices, gold | "
        "answer) instead of --dataset/--split, answered over the model's own KG (its --kg when trained on "
        "your questions).", exists=True, dir_okay=False)] = None,
    limit: Annotated[int | None, typer.Option(
        min=1, help="Use only the first N questions of each split.")] = None,
    predictions: Annotated[
        Path | None, typer.Option(help="Directory for per-question predictions (<split>.jsonl).")
    ] = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Accuracy of a saved KG model on the given splits of a benchmark, or on your questions."""
    from kgwise.app.kg_model import config_path, evaluate

    distinct_outputs({"--json": json_out}, {"--model": model, "--model's config": config_path(model),
                                            "--predictions": predictions, "--questions": questions})
    write_json(evaluate(model, dataset, split or [], questions, limit, predictions, data, _log), json_out)
