"""``KGMPredictor``: a saved KG model answering raw multiple-choice questions (a Coke arm of the KGM
cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from kgwise.config import data_dir
from kgwise.embed import Encoder, MiniLM
from kgwise.errors import ConfigError
from kgwise.extract.subgraph import SubgraphConfig
from kgwise.kg.benchmarks import KGSpec, build_kg
from kgwise.kg.csr import CSRGraph
from kgwise.kgm.cache import GraphBuilder
from kgwise.kgm.features import FeatureConfig, NodeTable, QuestionGraph
from kgwise.kgm.io import load_model
from kgwise.kgm.model import GraphQA, TextQA
from kgwise.kgm.train import predict_proba
from kgwise.types import Answer, Question, Usage

__all__ = ["KGMPredictor"]


class KGMPredictor:
    """Ground → P_sub → embed → model, for one question at a time or a list.

    Build with :meth:`load`; ``kg`` may be passed to share an already loaded graph (it must have the
    relations the model was trained with).
    """

    def __init__(self, model: GraphQA | TextQA, builder: GraphBuilder, name: str = "kgm") -> None:
        self.model = model
        self.builder = builder
        self.name = name

    @classmethod
    def load(
        cls,
        path: str | Path,
        data: str | Path | None = None,
        kg: CSRGraph | None = None,
        encoder: Encoder | None = None,
        name: str | None = None,
    ) -> KGMPredictor:
        model, cfg = load_model(path)
        spec = KGSpec.from_dict(cfg["kg"])
        root = data_dir(data) if spec.needs_data else Path("/")
        graph = kg if kg is not None else build_kg(spec, root)
        if model.config.kind == "graph" and list(graph.relations) != list(cfg["kg_relations"]):
            raise ConfigError(f"{path}: the KG's relations differ from those the model was trained on")
        builder = GraphBuilder(
            graph,
            encoder or MiniLM(),
            FeatureConfig(**cfg["feature"]),
            SubgraphConfig(**cfg["subgraph"]),
            root / spec.wordnet if spec.wordnet else None,
        )
        return cls(model, builder, name or Path(path).stem)

    def predict_many(self, questions: Sequence[Question]) -> list[npt.NDArray[np.float64]]:
        """Probabilities over each question's choices (in choice order)."""
        return self.predict_graphs([self.builder.build(q) for q in questions])

    def predict_graphs(self, graphs: Sequence[QuestionGraph]) -> list[npt.NDArray[np.float64]]:
        """:meth:`predict_many` on questions already built into graphs (``self.builder.build``)."""
        table: NodeTable | None = None
        if isinstance(self.model, GraphQA):
            table = self.builder.node_table(graphs)
        return predict_proba(self.model, graphs, table)

    def predict(self, question: Question) -> npt.NDArray[np.float64]:
        """Probabilities over ``question``'s choices (softmax of the model's choice scores)."""
        return self.predict_many([question])[0]

    def answer(self, question: Question, graph: QuestionGraph | None = None) -> Answer:
        """The most probable choice as an :class:`~kgwise.types.Answer` (one local call, priced by the
        router); ``graph``: the question already built (``self.builder.build``)."""
        probs = self.predict_graphs([self.builder.build(question) if graph is None else graph])[0]
        labels = [c.label for c in question.choices]
        return Answer(
            question_id=question.id,
            prediction=labels[int(np.argmax(probs))],
            probabilities={lab: float(p) for lab, p in zip(labels, probs, strict=True)},
            arm=self.name,
            usage=Usage(calls=1),
        )
