"""``kgwise kgm train``, ``kgwise kgm answer`` and ``kgwise eval kgm``: the small KG models (Coke's cheap
arms)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app, eval_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    console,
    distinct_outputs,
    err_console,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.errors import ConfigError

kgm_app = typer.Typer(
    help="Small KG-based QA models (train, answer; evaluate with `kgwise eval kgm`).", no_args_is_help=True
)
app.add_typer(kgm_app, name="kgm")


def _log(message: str) -> None:
    err_console.print(message)


@kgm_app.command("train")
@friendly_errors
def train(
    dataset: Annotated[str, typer.Option(help="csqa (ihtrain, early stop on ihdev) or obqa (train, dev).")],
    out: Annotated[
        Path, typer.Option(help="Weights file; the JSON config is written beside it (FILE.json).",
                           callback=writable)
    ],
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
                     {"--config": config})
    if kind not in (None, "graph", "text"):
        raise ConfigError(f"--kind must be graph or text, got {kind!r}")
    train_cfg = configured("kgm_train", config, seed=seed, epochs=epochs, max_minutes=max_minutes)
    model = configured("kgm_model", config, kind=kind)
    derived = ModelConfig()
    for name, source in (("emb_dim", "the sentence encoder"), ("num_relations", "the KG")):
        if getattr(model, name) != getattr(derived, name):
            raise ConfigError(f"{config}: [kgm_model] {name} is set by {source}, not by the config")
    sizes = {k: getattr(model, k) for k in ("context_hidden", "gnn_hidden", "layers", "heads", "dropout")}
    report = train_file(dataset, out, model.kind, data, train_cfg, model_overrides=sizes, limit=limit,
                        log=_log)
    write_json(report, json_out)


@kgm_app.command("answer")
@friendly_errors
def answer(
    question: Annotated[str, typer.Argument(help="The question text.")],
    choices: Annotated[str, typer.Option("--choices", help='Options separated by "|".')],
    model: Annotated[Path, typer.Option(help="A model file written by `kgwise kgm train`.", exists=True,
                                        dir_okay=False)],
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Answer one multiple-choice question with a saved KG model (its own KG, built from --data): the
    answer, the choice probabilities and the size of the subgraph it read."""
    from kgwise.kgm.io import config_path
    from kgwise.kgm.predictor import KGMPredictor
    from kgwise.types import make_question

    distinct_outputs({"--json": json_out}, {"--model": model, "--model's config": config_path(model)})
    q = make_question(question, choices.split("|"))
    predictor = KGMPredictor.load(model, data)
    kind = predictor.model.config.kind
    graph = predictor.builder.build(q)
    ans = predictor.answer(q, graph)
    # what the graph model reads (0 nodes: nothing grounded, it reads the text only)
    nodes = len(graph.nodes) if kind == "graph" else None
    text = {c.label: c.text for c in q.choices}
    probs = {text[k]: round(v, 6) for k, v in ans.probabilities.items()}
    report = {"model": predictor.name, "kind": kind, "answer": text[ans.prediction], "label": ans.prediction,
              "probabilities": probs, "subgraph_nodes": nodes}
    if json_out is not None:
        write_json(report, json_out)
        return
    read = f", {nodes} subgraph nodes" if nodes is not None else ""
    console.print(f"[bold]answer:[/bold] {report['answer']}  ({kind} model {report['model']}{read})")
    for name, p in sorted(probs.items(), key=lambda kv: -kv[1]):
        console.print(f"  {p:7.2%}  {name}")


@eval_app.command("kgm")
@friendly_errors
def eval_kgm(
    dataset: Annotated[str, typer.Option(help="Dataset name (csqa, obqa).")],
    model: Annotated[Path, typer.Option(help="A model file written by `kgwise kgm train`.")],
    split: Annotated[list[str], typer.Option(help="Split(s) to evaluate, e.g. ihtest (repeatable).")],
    limit: Annotated[int | None, typer.Option(
        min=1, help="Use only the first N questions of each split.")] = None,
    predictions: Annotated[
        Path | None, typer.Option(help="Directory for per-question predictions (<split>.jsonl).")
    ] = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Accuracy of a saved KG model on the given splits."""
    from kgwise.kgm.io import config_path
    from kgwise.kgm.pipeline import evaluate_file

    distinct_outputs({"--json": json_out}, {"--model": model, "--model's config": config_path(model),
                                            "--predictions": predictions})
    write_json(
        evaluate_file(model, dataset, split, data, limit=limit, log=_log, predictions=predictions), json_out
    )
