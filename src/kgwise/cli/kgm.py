"""``kgwise kg model train`` and ``kgwise eval kgm``: the small KG models (Coke's cheap arms). A trained
model answers as a pipeline arm (``kgwise init --arm NAME=kgm:MODEL``, then ``kgwise ask``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kgwise.cli.apps import eval_app, kg_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    distinct_outputs,
    err_console,
    friendly_errors,
    listed,
    writable,
    write_json,
)
from kgwise.errors import ConfigError
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.kgm.pipeline import OwnData

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
    from kgwise.kgm.io import config_path
    from kgwise.kgm.model import ModelConfig
    from kgwise.kgm.pipeline import train_file
    from kgwise.settings import configured

    distinct_outputs({"--out": out, "--out's config": config_path(out), "--json": json_out},
                     {"--config": config, "--questions": questions, "--dev-questions": dev_questions,
                      "--kg": kg})
    reserved = _span(reserve, "--reserve")
    if reserved is not None and questions is not None:
        raise ConfigError("--reserve goes with --dataset; leave the questions to keep unseen out of your "
                          "--questions file instead")
    training = _training_data(dataset, questions, dev_questions, kg, train_seed=seed or 0)
    if kind not in (None, "graph", "text"):
        raise ConfigError(f"--kind must be graph or text, got {kind!r}")
    train_cfg = configured("kgm_train", config, seed=seed, epochs=epochs, max_minutes=max_minutes)
    model = configured("kgm_model", config, kind=kind)
    derived = ModelConfig()
    for name, source in (("emb_dim", "the sentence encoder"), ("num_relations", "the KG")):
        if getattr(model, name) != getattr(derived, name):
            raise ConfigError(f"{config}: [kgm_model] {name} is set by {source}, not by the config")
    sizes = {k: getattr(model, k) for k in ("context_hidden", "gnn_hidden", "layers", "heads", "dropout")}
    report = train_file(training, out, model.kind, data, train_cfg, model_overrides=sizes, limit=limit,
                        log=_log, reserve=reserved)
    write_json(report, json_out)


def _span(text: str | None, option: str) -> tuple[int, int] | None:
    """``"START:STOP"`` as two integers (``ConfigError`` naming ``option`` otherwise)."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ConfigError(f"{option} must be START:STOP (two whole numbers), got {text!r}")
    return int(parts[0]), int(parts[1])


def _labelled_mc(path: Path) -> list[Question]:
    """The questions of ``path``, each with choices and a gold answer (``ConfigError`` naming those
    without)."""
    from kgwise.datasets.user import read_questions

    qs = read_questions(path)
    bad = [q.ref for q in qs if not q.choices or q.gold_index is None]
    if bad:
        raise ConfigError(f"{path}: {len(bad)} question(s) without choices or a gold answer ({listed(bad)}); "
                          "the KG model learns from labelled multiple-choice questions")
    return qs


def _training_data(dataset: str | None, questions: Path | None, dev_questions: Path | None,
                   kg: Path | None, train_seed: int) -> str | OwnData:
    """``--dataset``, or ``--questions`` (+ ``--dev-questions``, else a seeded fifth held out) over
    ``--kg``."""
    if questions is None:
        given = [o for o, v in (("--kg", kg), ("--dev-questions", dev_questions)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --questions FILE (a --dataset brings its own)")
        if dataset is None:
            raise ConfigError("give --dataset (csqa, obqa) or --questions FILE --kg GRAPH")
        return dataset
    if dataset is not None:
        raise ConfigError("give --dataset or --questions FILE, not both")
    from kgwise.kgm.pipeline import OwnData

    if kg is None:
        raise ConfigError("--questions needs --kg GRAPH: a --dataset brings its own KG "
                          "(kgwise.kg.benchmarks), your questions need yours")
    train_qs = _labelled_mc(questions)
    if dev_questions is not None:
        dev_qs = _labelled_mc(dev_questions)
    else:
        if len(train_qs) < 5:
            raise ConfigError(f"{questions}: {len(train_qs)} questions are too few to hold a fifth out for "
                              "early stopping; give at least 5, or --dev-questions FILE")
        import numpy as np

        order = np.random.default_rng(train_seed).permutation(len(train_qs))
        n_dev = len(train_qs) // 5
        dev_qs = [train_qs[i] for i in sorted(order[:n_dev])]
        train_qs = [train_qs[i] for i in sorted(order[n_dev:])]
        _log(f"{questions}: {len(train_qs)} questions train, {n_dev} held out for early stopping")
    return OwnData(questions.stem, {"train": train_qs, "dev": dev_qs}, kg)


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
    from kgwise.kgm.io import config_path
    from kgwise.kgm.pipeline import OwnData, evaluate_file

    distinct_outputs({"--json": json_out}, {"--model": model, "--model's config": config_path(model),
                                            "--predictions": predictions, "--questions": questions})
    source: str | OwnData
    if questions is not None:
        if dataset is not None or split:
            raise ConfigError("give --questions FILE or --dataset/--split, not both")
        source, splits = OwnData(questions.stem, {questions.stem: _labelled_mc(questions)}), [questions.stem]
    elif dataset is None or not split:
        raise ConfigError("give --dataset and --split, or --questions FILE")
    else:
        source, splits = dataset, split
    write_json(
        evaluate_file(model, source, splits, data, limit=limit, log=_log, predictions=predictions), json_out
    )
