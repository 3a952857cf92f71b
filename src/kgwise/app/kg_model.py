"""The KG models a pipeline's ``kgm`` arms answer with: train one on a benchmark or on a user's labelled
multiple-choice questions over their KG (``kgwise kg model train``), and measure its accuracy (``kgwise eval
kgm``). Sizes and optimisation come from the ``[kgm_model]`` and ``[kgm_train]`` tables of a
hyper-parameter file (:mod:`kgwise.settings`); the training itself is :func:`kgwise.kgm.pipeline.train_file`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kgwise.datasets.user import read_labelled_mc
from kgwise.errors import ConfigError
from kgwise.kgm.io import config_path
from kgwise.kgm.pipeline import OwnData, evaluate_file, train_file
from kgwise.types import Question

__all__ = ["config_path", "evaluate", "train", "training_data"]

Log = Callable[[str], None]


def _labelled_mc(path: Path) -> list[Question]:
    return read_labelled_mc(path, "the KG model learns from labelled multiple-choice questions")


def training_data(dataset: str | None, questions: Path | None, dev_questions: Path | None, kg: Path | None,
                  train_seed: int, log: Log) -> str | OwnData:
    """``dataset``, or ``questions`` (with ``dev_questions``, else a seeded fifth held out for early
    stopping) over the graph ``kg``."""
    if questions is None:
        given = [o for o, v in (("--kg", kg), ("--dev-questions", dev_questions)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --questions FILE (a --dataset brings its own)")
        if dataset is None:
            raise ConfigError("give --dataset (csqa, obqa) or --questions FILE --kg GRAPH")
        return dataset
    if dataset is not None:
        raise ConfigError("give --dataset or --questions FILE, not both")
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
        log(f"{questions}: {len(train_qs)} questions train, {n_dev} held out for early stopping")
    return OwnData(questions.stem, {"train": train_qs, "dev": dev_qs}, kg)


def train(training: str | OwnData, out: Path, config: Path | None, *, kind: str | None = None,
          seed: int | None = None, epochs: int | None = None, max_minutes: float | None = None,
          limit: int | None = None, reserve: tuple[int, int] | None = None, data: Path | None = None,
          log: Log = print) -> dict[str, Any]:
    """Train a KG model on ``training`` into ``out`` (its JSON config beside it): ``[kgm_model]`` and
    ``[kgm_train]`` from the file ``config``, the given values winning; the report."""
    from kgwise.kgm.model import ModelConfig
    from kgwise.settings import configured

    if kind not in (None, "graph", "text"):
        raise ConfigError(f"--kind must be graph or text, got {kind!r}")
    train_cfg = configured("kgm_train", config, seed=seed, epochs=epochs, max_minutes=max_minutes)
    model = configured("kgm_model", config, kind=kind)
    derived = ModelConfig()
    for name, source in (("emb_dim", "the sentence encoder"), ("num_relations", "the KG")):
        if getattr(model, name) != getattr(derived, name):
            raise ConfigError(f"{config}: [kgm_model] {name} is set by {source}, not by the config")
    sizes = {k: getattr(model, k) for k in ("context_hidden", "gnn_hidden", "layers", "heads", "dropout")}
    return train_file(training, out, model.kind, data, train_cfg, model_overrides=sizes, limit=limit, log=log,
                      reserve=reserve)


def evaluate(model: Path, dataset: str | None, splits: Sequence[str], questions: Path | None,
             limit: int | None = None, predictions: Path | None = None, data: Path | None = None,
             log: Log = print) -> dict[str, Any]:
    """Accuracy of the saved KG model ``model`` on ``splits`` of ``dataset``, or on the labelled
    ``questions`` (over the model's own KG)."""
    source: str | OwnData
    if questions is not None:
        if dataset is not None or splits:
            raise ConfigError("give --questions FILE or --dataset/--split, not both")
        source, splits = OwnData(questions.stem, {questions.stem: _labelled_mc(questions)}), [questions.stem]
    elif dataset is None or not splits:
        raise ConfigError("give --dataset and --split, or --questions FILE")
    else:
        source = dataset
    return evaluate_file(model, source, splits, data, limit=limit, log=log, predictions=predictions)
