"""A file of questions through the pipeline — ``kgwise ask --questions FILE``.

Each question is answered by :meth:`Pipeline.answer` exactly as a single one is (routed, grounded,
calibrated, journalled), with the models loaded once. Every answer is appended to the output JSON Lines
file as soon as it is made (flushed and fsynced), so an interrupted run resumes: a rerun answers only the
questions whose id the output does not hold yet. A question the pipeline refuses (no arm affordable, a
question it cannot take) is not written: it is counted and named in the report, with the reason, and a
rerun asks it again.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kgwise.datasets.user import read_questions
from kgwise.errors import ConfigError, KgwiseError
from kgwise.files import TornLineWarning, distinct_outputs
from kgwise.progress import bar

if TYPE_CHECKING:
    from kgwise.app.pipeline import Pipeline

__all__ = ["AnswerFileReport", "answer_file"]


@dataclass(frozen=True, slots=True)
class AnswerFileReport:
    """What a batch did: questions in the file, answered now, found answered by an earlier run, refused
    (``refused``: id → reason), the cost paid now, and the seconds spent in model calls against the
    run's wall time (``overhead_ratio`` = wall / model seconds)."""

    questions: int
    answered: int
    resumed: int
    refused: dict[str, str] = field(default_factory=dict)
    cost: float = 0.0
    unit: str = ""
    model_s: float = 0.0
    wall_s: float = 0.0

    @property
    def overhead_ratio(self) -> float | None:
        return self.wall_s / self.model_s if self.model_s > 0 else None


def _done_ids(out: Path) -> set[str]:
    """Ids already in ``out``; a torn last line (a run killed mid-write) is cut off with a warning."""
    if not out.exists():
        return set()
    raw = out.read_bytes()
    keep = raw.rfind(b"\n") + 1
    if keep < len(raw):
        warnings.warn(f"{out}: the last line was torn (an interrupted write); it is dropped and that "
                      "question answered again", TornLineWarning, stacklevel=3)
        with out.open("r+b") as fh:
            fh.truncate(keep)
    done: set[str] = set()
    for k, line in enumerate(raw[:keep].decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            done.add(str(json.loads(line)["id"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{out}:{k}: not a row of `kgwise ask --questions` ({exc}); write the answers "
                              "to another file or remove this one") from exc
    return done


def answer_file(pipeline: Pipeline, questions: str | Path, out: str | Path, *,
                echo: Callable[[str], None] | None = None, progress: bool | None = None) -> AnswerFileReport:
    """Answer every question of ``questions`` (the user's JSONL format) not yet in ``out`` and append each
    result (``PipelineResult.to_dict()`` with the question's ``id``) to ``out``."""
    src, dst = Path(questions), Path(out)
    distinct_outputs({"the answers file": dst}, {"the questions file": src})
    qs = read_questions(src)
    done = _done_ids(dst)
    todo = [q for q in qs if q.id not in done]
    if echo is not None and done:
        echo(f"{len(qs) - len(todo)} of {len(qs)} questions already answered in {dst}; answering the rest")
    refused: dict[str, str] = {}
    cost = model_s = 0.0
    answered = 0
    start = time.perf_counter()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with dst.open("a", encoding="utf-8") as fh:
        for q in bar(todo, desc="answering", unit="q", enabled=progress):
            choices = list(q.choice_texts) or None
            try:
                result = pipeline.answer(q.text, choices)
            except KgwiseError as exc:
                refused[q.id] = str(exc)
                continue
            answered += 1
            cost += result.cost
            model_s += result.usage.latency_s
            row = {"id": q.id, **result.to_dict()}
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    return AnswerFileReport(len(qs), answered, len(qs) - len(todo), refused, cost,
                            pipeline.config.router.unit, model_s, time.perf_counter() - start)
