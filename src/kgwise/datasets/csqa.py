"""CommonsenseQA (Talmor et al. 2019) with the official and the in-house (Lin et al. 2019) splits.

``ihtrain`` = the official train questions whose ids are listed in ``inhouse_split_qids.txt``,
``ihtest`` = the remaining official train questions, ``ihdev`` = the official dev set. The official test
set has no answers (``gold`` empty). ``Question.concept`` is CSQA's ``question_concept``.
"""

from __future__ import annotations

from pathlib import Path

from kgwise.datasets._io import dataset_file, mc_questions
from kgwise.errors import DataError
from kgwise.types import Question

__all__ = ["SPLITS", "inhouse_train_ids", "load_csqa"]

SPLITS = ("train", "dev", "test", "ihtrain", "ihdev", "ihtest")
_FILES = {"train": "csqa/train_rand_split.jsonl", "dev": "csqa/dev_rand_split.jsonl",
          "test": "csqa/test_rand_split.jsonl"}
_IH_IDS = "csqa/inhouse_split_qids.txt"


def _read(root: Path, official: str, split: str) -> list[Question]:
    return mc_questions(dataset_file(root, _FILES[official]), "csqa", split, keyed=official != "test",
                        concept=True)


def inhouse_train_ids(root: Path) -> list[str]:
    """The ids of the in-house train split, in file order; ``DataError`` on a blank or repeated id."""
    path = dataset_file(root, _IH_IDS)
    ids: list[str] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            qid = line.strip()
            if not qid:
                if line.strip("\r\n"):
                    raise DataError("blank id", path, lineno)
                continue
            if qid in seen or len(qid.split()) != 1:
                raise DataError(f"repeated or malformed id {qid!r}", path, lineno)
            seen.add(qid)
            ids.append(qid)
    return ids


def load_csqa(root: Path, split: str) -> list[Question]:
    """CSQA questions of ``split`` (one of ``SPLITS``) from the data directory ``root``."""
    if split in _FILES:
        return _read(root, split, split)
    if split == "ihdev":
        return _read(root, "dev", split)
    train = _read(root, "train", split)
    ih_ids = inhouse_train_ids(root)
    known = {q.id for q in train}
    missing = next((i for i in ih_ids if i not in known), None)
    if missing is not None:
        raise DataError(f"in-house id {missing} is not an official train question", root / _IH_IDS)
    wanted = set(ih_ids)
    keep = split == "ihtrain"
    return [q for q in train if (q.id in wanted) == keep]
