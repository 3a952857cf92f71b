"""OpenBookQA (Mihaylov et al. 2018), ``Main`` splits, and its open book of 1,326 science facts.

``Question.context`` stays empty: the facts are a separate resource (``load_openbook_facts``), not a
per-question passage.
"""

from __future__ import annotations

from pathlib import Path

from kgwise.datasets._io import dataset_file, mc_questions
from kgwise.errors import DataError
from kgwise.types import Question

__all__ = ["SPLITS", "load_obqa", "load_openbook_facts"]

SPLITS = ("train", "dev", "test")


def load_obqa(root: Path, split: str) -> list[Question]:
    """OBQA questions of ``split`` from ``root/obqa/Main/<split>.jsonl``."""
    return mc_questions(dataset_file(root, f"obqa/Main/{split}.jsonl"), "obqa", split, keyed=True)


def load_openbook_facts(root: Path) -> list[str]:
    """The open-book facts of ``root/obqa/Main/openbook.txt``, one per line, surrounding quotes removed;
    a blank line or a lone quote raises ``DataError`` naming file and line."""
    path = dataset_file(root, "obqa/Main/openbook.txt")
    facts = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            fact = line.strip()
            if len(fact) >= 2 and fact[0] == fact[-1] == '"':
                fact = fact[1:-1].strip()
            if not fact or fact == '"':
                raise DataError("empty fact", path, lineno)
            facts.append(fact)
    return facts
