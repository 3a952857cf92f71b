"""UAG's per-question tables for a list of labelled questions, built in chunks that are saved as they are
done (a stopped run resumes); used by the pipeline's fit and by the evaluations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kgwise.conformal.evaluator import EvaluatorConfig, Generator, RecordedGenerations, UQEvaluator
from kgwise.conformal.grid import QuestionTable, TableBatch
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
                 generator: Generator | None = None, say: Callable[[str], None] | None = None) -> TableBatch:
    """Threshold-free UAG tables of every question, built in chunks saved under ``cache`` (resumable).
    ``generations`` are recorded answers by id; with ``generations=None`` the live ``generator`` answers
    from each question's best retrieved paths (Table 5 prompt). Before the long part, ``say`` (default:
    stderr when ``progress``) gets how many tables are to build, the LLM calls they need and the expected
    time from the first few, timed."""
    from kgwise.progress import bar as progress_bar
    from kgwise.progress import estimate

    retriever = UQRetriever(kg, scorer, config)
    if generations is None and generator is None:
        raise ConfigError("build_tables: pass recorded generations or a live generator")
    ev = UQEvaluator(scorer, RecordedGenerations(generations) if generations is not None else generator,
                     evaluator)
    if say is None and progress:
        say = _to_stderr
    starts = list(range(0, len(questions), chunk))
    paths = {s: cache / f"chunk-{s:06d}.npz" if cache is not None else None for s in starts}
    cached: dict[int, TableBatch] = {}
    for start in starts:
        path = paths[start]
        if path is not None and path.is_file():
            part = TableBatch.load(path)
            if part.qids == [q.id for q in questions[start:start + chunk]]:
                cached[start] = part
    todo = sum(len(questions[s:s + chunk]) for s in starts if s not in cached)
    fresh: list[QuestionTable] = []

    def build(q: Question) -> None:
        recorded = generations.get(q.id, "") if generations is not None else None
        fresh.append(question_table(q, retriever, ev, recorded))

    pending = [q for s in starts if s not in cached for q in questions[s:s + chunk]]
    if todo and say is not None:
        def warm_up() -> int:
            for q in pending[:3]:
                build(q)
            return len(fresh)

        est = estimate(todo, warm_up)
        say(f"UAG tables: {len(questions) - todo:,} cached, "
            + est.describe("to build", 1.0 if generations is None else 0.0))
    parts: list[TableBatch] = []
    bar = progress_bar(total=len(questions), desc="UAG tables", enabled=None if progress else False, unit="q")
    bar.update(len(questions) - todo + len(fresh))
    it = iter(pending[len(fresh):])
    for start in starts:
        if start in cached:
            parts.append(cached[start])
            continue
        block = questions[start:start + chunk]
        while len(fresh) < len(block):
            build(next(it))
            bar.update(1)
        part = TableBatch.from_tables(fresh[:len(block)])
        del fresh[:len(block)]
        path = paths[start]
        if path is not None:
            part.save(path)
        parts.append(part)
    bar.close()
    return TableBatch.from_tables([p.table(i) for p in parts for i in range(p.num_questions)])


def _to_stderr(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)
