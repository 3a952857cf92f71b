"""End-to-end KG-model runs: dataset → KG → cached features → train → save → evaluate."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.config import cache_dir, data_dir
from kgwise.datasets import load
from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.extract.subgraph import SubgraphConfig
from kgwise.files import short_hash
from kgwise.kg.benchmarks import DATASET_KGS, KGSpec, build_kg
from kgwise.kg.cache import graph_key
from kgwise.kg.csr import CSRGraph
from kgwise.kgm.cache import FeatureCache, GraphBuilder, cache_meta
from kgwise.kgm.features import FeatureConfig, NodeTable, QuestionGraph
from kgwise.kgm.io import load_model, save_model
from kgwise.kgm.model import ModelConfig, build_model
from kgwise.kgm.train import TrainConfig, predict_proba, train_model
from kgwise.progress import Estimate, estimate_steps
from kgwise.types import Question

__all__ = ["SPLITS", "Features", "OwnData", "evaluate_file", "reserved_spans", "train_file"]

SPLITS: dict[str, tuple[str, str]] = {"csqa": ("ihtrain", "ihdev"), "obqa": ("train", "dev")}
"""(train split, early-stopping dev split) per dataset."""


DEFAULT_FEATURE = FeatureConfig(max_nodes=100)
"""100 nodes per question subgraph (QA-GNN uses 200; halved to train on two CPU cores)."""


@dataclass(frozen=True)
class OwnData:
    """A user's labelled multiple-choice questions by split name (``train`` and ``dev`` to train; any to
    evaluate) over their graph file ``kg`` (``None``: the saved model's KG, to evaluate); ``name`` names
    them in reports and cache directories."""

    name: str
    splits: Mapping[str, Sequence[Question]]
    kg: Path | None = None


class Features:
    """Builds and opens cached features for one dataset on its KG (the KG and builder load lazily);
    ``questions``: the questions of each split when they are not a benchmark's (a user's files)."""

    def __init__(
        self,
        dataset: str,
        data: str | Path | None = None,
        kg_spec: KGSpec | None = None,
        feature: FeatureConfig = DEFAULT_FEATURE,
        root: Path | None = None,
        log: Callable[[str], None] = print,
        questions: Mapping[str, Sequence[Question]] | None = None,
    ) -> None:
        if dataset not in DATASET_KGS and kg_spec is None:
            raise ConfigError(
                f"no KG model setup for dataset {dataset!r}; choose one of {sorted(DATASET_KGS)}, or give "
                "your questions with --questions FILE and their graph with --kg GRAPH"
            )
        self.dataset = dataset
        self.spec = kg_spec or DATASET_KGS[dataset]
        self.questions = questions
        needs_data = self.spec.needs_data or questions is None
        self.data = data_dir(data) if needs_data else Path(data) if data is not None else Path.cwd()
        self.feature = feature
        self.subgraph = SubgraphConfig(max_nodes=feature.max_nodes)
        self.root = root or cache_dir() / "kgm" / "features"
        self.log = log
        self._kg: CSRGraph | None = None
        self._builder: GraphBuilder | None = None

    @property
    def kg(self) -> CSRGraph:
        if self._kg is None:
            t = time.perf_counter()
            self._kg = build_kg(self.spec, self.data)
            self.log(f"KG {self._kg!r} ready in {time.perf_counter() - t:.1f} s")
        return self._kg

    @property
    def builder(self) -> GraphBuilder:
        if self._builder is None:
            wn = self.data / self.spec.wordnet if self.spec.wordnet else None
            self._builder = GraphBuilder(self.kg, MiniLM(), self.feature, self.subgraph, wn)
        return self._builder

    def split(self, split: str, limit: int | None = None) -> tuple[list[QuestionGraph], NodeTable]:
        """The split's graphs and node table, building the cache first where needed (saying first, from a
        measured warm-up, how long that will take)."""
        if self.questions is not None:
            questions = list(self.questions[split])
        else:
            questions = load(self.dataset, split, self.data)
        if limit is not None:
            questions = questions[:limit]
        graph = short_hash([self.spec.key(), graph_key(self.spec.sources(self.data))])  # a rebuilt KG: anew
        meta = cache_meta(self.dataset, split, graph, len(questions), self.feature, self.subgraph)
        name = f"{self.dataset}-{split}-{graph}-n{self.feature.max_nodes}-q{len(questions)}"
        if self.questions is not None:  # a user's file may change under the same name and count
            digest = short_hash([[q.id, q.text, q.choice_texts, list(q.gold)] for q in questions])
            meta["questions_digest"] = digest
            name += f"-{digest}"
        cache = FeatureCache(self.root / name, meta)
        if not cache.complete:
            if not any(cache.directory.glob("part-*.npz")) and len(questions) > 1:
                self.builder.build(questions[0])  # loads the encoder: not part of the timed warm-up
                rest, built = questions[1:], []
                est = estimate_steps(len(rest), lambda i: built.append(self.builder.build(rest[i])))
                t = time.perf_counter()  # the node table embeds the labels of every node the graphs hold
                self.builder.node_table(built)
                est = Estimate(len(questions), est.warmup_items, est.warmup_s + time.perf_counter() - t)
                self.log(f"features {self.dataset}/{split}: " + est.describe(
                    "questions to ground, extract (P_sub) and embed, with their nodes' labels"))
            t = time.perf_counter()
            cache.build(questions, self.builder, desc=f"{self.dataset}/{split}")
            self.log(
                f"features {self.dataset}/{split}: {len(questions)} questions in "
                f"{time.perf_counter() - t:.0f} s"
            )
        return cache.graphs(), cache.table()

    def relations(self) -> list[str]:
        return list(self.kg.relations)


def train_file(
    dataset: str | OwnData,
    out: Path,
    kind: str = "graph",
    data: str | Path | None = None,
    train_config: TrainConfig | None = None,
    model_overrides: dict[str, Any] | None = None,
    limit: int | None = None,
    log: Callable[[str], None] = print,
    reserve: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Train a ``kind`` model (``graph`` or ``text``) on the dataset's train split (or a user's ``train``
    questions, :class:`OwnData` with their ``kg``) with early stopping on its dev split; save it to
    ``out``; return a report. ``reserve``: ``(start, stop)``, train-split questions ``start`` to
    ``stop − 1`` left out of training (kept unseen for fitting a pipeline on them); the report's
    ``train_spans`` name the half-open index spans of the split it trained on."""
    if isinstance(dataset, OwnData):
        if dataset.kg is None or set(dataset.splits) != {"train", "dev"}:
            raise ConfigError("training on your own questions needs a graph file and train and dev questions")
        if reserve is not None:
            raise ConfigError("a reserved range goes with a benchmark data set; leave your own reserved "
                              "questions out of the training file instead")
        feats = Features(dataset.name, data, KGSpec.of_file(dataset.kg), log=log, questions=dataset.splits)
        train_split, dev_split = "train", "dev"
        name = dataset.name
    else:
        if dataset not in SPLITS:
            raise ConfigError(f"KG model training is set up for {sorted(SPLITS)}, not {dataset!r}; or give "
                              "your questions with --questions FILE and their graph with --kg GRAPH")
        feats = Features(dataset, data, log=log)
        train_split, dev_split = SPLITS[dataset]
        name = dataset
    train = feats.split(train_split, limit)
    dev = feats.split(dev_split, limit)
    spans = reserved_spans(len(train[0]), reserve, train_split)
    train = ([g for a, b in spans for g in train[0][a:b]], train[1])
    relations = feats.relations()
    cfg = ModelConfig(kind=kind, num_relations=len(relations), **(model_overrides or {}))  # type: ignore[arg-type]
    model = build_model(cfg)
    table = None if kind == "text" else train[1]
    dev_table = None if kind == "text" else dev[1]
    train_config = train_config or TrainConfig()
    result = train_model(model, (train[0], table), (dev[0], dev_table), train_config, log=log)
    report = {
        "dataset": name,
        "kind": kind,
        "train_split": train_split,
        "dev_split": dev_split,
        "train_questions": len(train[0]),
        "train_spans": [list(span) for span in spans],
        "best_epoch": result.best_epoch,
        "best_dev_accuracy": result.best_dev_accuracy,
        "train_seconds": result.seconds,
        "stopped": result.stopped,
        "history": result.history,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    save_model(
        out,
        model,
        {
            "dataset": name,
            "kg": feats.spec.to_dict(),
            "kg_relations": relations,
            "feature": asdict(feats.feature),
            "subgraph": asdict(feats.subgraph),
            "encoder": MiniLM.model_name,
            "train": asdict(train_config),
            "report": report,
        },
    )
    log(f"saved {out}")
    return report


def reserved_spans(n: int, reserve: tuple[int, int] | None, split: str = "train"
                   ) -> list[tuple[int, int]]:
    """The half-open index spans of ``n`` questions left once ``reserve`` (``(start, stop)``) is taken out
    (``ConfigError`` naming the split when the range is empty or outside it, or leaves nothing)."""
    if reserve is None:
        return [(0, n)]
    start, stop = reserve
    if not 0 <= start < stop <= n:
        raise ConfigError(f"reserved range {start}:{stop} is not a non-empty range within the {n} {split} "
                          "questions")
    spans = [(a, b) for a, b in ((0, start), (stop, n)) if b > a]
    if not spans:
        raise ConfigError(f"reserved range {start}:{stop} leaves none of the {n} {split} questions to "
                          "train on")
    return spans


def evaluate_file(
    model_path: Path,
    dataset: str | OwnData,
    splits: Sequence[str],
    data: str | Path | None = None,
    limit: int | None = None,
    log: Callable[[str], None] = print,
    predictions: Path | None = None,
) -> dict[str, Any]:
    """Accuracy of a saved model on each of ``splits`` (their first ``limit`` questions if given).

    With ``predictions`` (a directory), also write ``<split>.jsonl`` there: per question its ``id``,
    ``probabilities`` over the choices, ``prediction`` (choice index), ``gold`` and ``correct``.
    """
    model, cfg = load_model(model_path)
    spec = KGSpec.from_dict(cfg["kg"])
    own = dataset if isinstance(dataset, OwnData) else None
    name = dataset.name if isinstance(dataset, OwnData) else dataset
    if own is not None:
        splits = list(own.splits)
    feats = Features(name, data, kg_spec=spec, feature=FeatureConfig(**cfg["feature"]), log=log,
                     questions=own.splits if own is not None else None)
    if cfg["model"]["kind"] == "graph" and feats.relations() != cfg["kg_relations"]:
        raise ConfigError(f"{model_path}: the KG's relations differ from those the model was trained on")
    report: dict[str, Any] = {"model": str(model_path), "kind": cfg["model"]["kind"], "dataset": name}
    trained_on = cfg.get("dataset")
    if trained_on is not None and trained_on != name and own is None:
        report["trained_on"] = trained_on
        log(f"warning: {model_path} was trained on {trained_on}, not {name}: its choices and graph "
            "features may not carry over")
    for split in splits:
        graphs, table = feats.split(split, limit)
        t = time.perf_counter()
        probs = predict_proba(model, graphs, table if cfg["model"]["kind"] == "graph" else None)
        hits = [int(np.argmax(p)) == g.label for p, g in zip(probs, graphs, strict=True)]
        acc = float(np.mean(hits))
        if predictions is not None:
            _write_predictions(predictions / f"{split}.jsonl", graphs, probs)
        report[split] = {
            "accuracy": acc,
            "questions": len(graphs),
            "seconds": round(time.perf_counter() - t, 2),
        }
        log(f"{name}/{split}: accuracy {acc:.4f} on {len(graphs)} questions")
    return report


def _write_predictions(
    path: Path, graphs: Sequence[QuestionGraph], probs: Sequence[npt.NDArray[np.float64]]
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for g, p in zip(graphs, probs, strict=True):
            pred = int(np.argmax(p))
            row = {
                "id": g.qid,
                "probabilities": [round(float(x), 6) for x in p],
                "prediction": pred,
                "gold": g.label,
                "correct": pred == g.label,
            }
            fh.write(json.dumps(row) + "\n")
