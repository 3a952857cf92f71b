"""MedQA-USMLE (Jin et al. 2021), US test set: ``question``, ``options`` {label: text}, ``answer_idx``.

The shared file has five options A–E per question; every option present becomes a choice, in the file's
key order. The file has no question ids, so ``Question.id`` is ``medqa-test-<line number>``.
"""

from __future__ import annotations

from pathlib import Path

from kgwise.datasets._io import dataset_file, read_jsonl, text_field
from kgwise.errors import DataError
from kgwise.types import Choice, Question

__all__ = ["SPLITS", "load_medqa"]

SPLITS = ("test",)


def load_medqa(root: Path, split: str) -> list[Question]:
    """MedQA questions of ``split`` (only ``test`` is shared) from the data directory ``root``."""
    path = dataset_file(root, f"medqa/{split}.jsonl")
    out = []
    for line, obj in read_jsonl(path):
        options = obj.get("options")
        if not isinstance(options, dict) or len(options) < 2:
            raise DataError("field 'options' missing or not an object of two or more options", path, line)
        choices = []
        for label, text in options.items():
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"option {label!r} is empty or not a string", path, line)
            choices.append(Choice(label, text))
        gold = text_field(obj, "answer_idx", path, line)
        if gold not in options:
            raise DataError(f"answer_idx {gold!r} is not an option label", path, line)
        out.append(Question(
            id=f"medqa-{split}-{line}",
            text=text_field(obj, "question", path, line),
            choices=tuple(choices),
            gold=(gold,),
            dataset="medqa",
            split=split,
        ))
    return out
