"""UAG's per-question tables for a list of labelled questions, built in chunks that are saved as they are
done (a stopped run resumes); used by ``uag calibrate`` and by the evaluations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgwise.conformal.evaluator import EvaluatorConfig, Generator, RecordedGenerations, UQEvaluator
from kgwise.conformal.grid import TableBatch
from kgwise.conformal.retriever import RetrieverConfig, UQRetriever
from kgwise.conformal.scores import S1
from kgwise.conformal.uag import question_table
from kgwise.errors import ConfigError
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Question

__all__ = ["TABLES_VERSION", "build_tables"]

TABLES_VERSION = 2
"""Part of every UAG table cache key; raised when the tables' content changes (2: S1 cross scores in
float64, independent of node numbering)."""


def build_tables(kg: KnowledgeGraph, questions: Sequence[Question], generations: dict[str, str] | None,
                 scorer: S1, config: RetrieverConfig, cache: Path | None = None, chunk: int = 100,
                 progress: bool = True, evaluator: EvaluatorConfig | None = None,
                 generator: Generator | None = None) -> TableBatch:
    """Threshold-free UAG tables of every question, built in chunks saved under ``cache`` (resumable).
    ``generations`` are recorded answers by id; with ``generations=None`` the live ``generator`` answers
    from each question's best retrieved paths (Table 5 prompt)."""
    from tqdm import tqdm

    retriever = UQRetriever(kg, scorer, config)
    if generations is None and generator is None:
        raise ConfigError("build_tables: pass recorded generations or a live generator")
    ev = UQEvaluator(scorer, RecordedGenerations(generations) if generations is not None else generator,
                     evaluator)
    parts: list[TableBatch] = []
    bar = tqdm(total=len(questions), desc="UAG tables", disable=not progress, unit="q")
    for start in range(0, len(questions), chunk):
        block = questions[start:start + chunk]
        path = cache / f"chunk-{start:06d}.npz" if cache is not None else None
        if path is not None and path.is_file():
            part = TableBatch.load(path)
            if part.qids == [q.id for q in block]:
                parts.append(part)
                bar.update(len(block))
                continue
        tables = []
        for q in block:
            recorded = generations.get(q.id, "") if generations is not None else None
            tables.append(question_table(q, retriever, ev, recorded))
            bar.update(1)
        part = TableBatch.from_tables(tables)
        if path is not None:
            part.save(path)
        parts.append(part)
    bar.close()
    return TableBatch.from_tables([p.table(i) for p in parts for i in range(p.num_questions)])
