"""Open KGQA benchmarks in the ToG format: WebQSP test (Yih et al. 2016) and Complex WebQuestions
(Talmor & Berant 2018).

``gold`` holds the answer names (null names in the file are skipped; a question may so have none),
``topic_entities`` the names of the ``topic_entity`` {mid: name} map. Ids are ``QuestionId`` (WebQSP)
and ``ID`` (CWQ).

A split's file is found in the data set's folder (:func:`split_file`): the one
``<prefix>_<split>*_tog_format.json`` there (the shared data hold WebQSP's 1,639 test questions and a
200-question CWQ test sample), or the file the split names (``--split cwq_test_tog_format``), so a full CWQ
test set dropped in beside the sample is read by naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json
from kgwise.types import Question

__all__ = ["FOLDERS", "SPLITS", "load_cwq", "load_webqsp", "split_file"]

SPLITS = ("test",)
FOLDERS: dict[str, tuple[str, str]] = {"webqsp": ("webqsp", "WebQSP"), "cwq": ("cwq", "cwq")}
"""Data set → (its folder under the data directory, the prefix of its ToG-format files)."""


def split_file(root: Path, dataset: str, split: str) -> Path:
    """The ToG-format file of ``dataset``/``split``: ``<folder>/<split>`` or ``<folder>/<split>.json`` when
    the split names a file, else the only ``<folder>/<prefix>_<split>*_tog_format.json``. ``ConfigError``
    naming the candidates when several match; ``DataError`` naming the folder when none does."""
    folder, prefix = FOLDERS[dataset]
    where = root / folder
    for named in (where / split, where / f"{split}.json"):
        if named.is_file() and named.parent == where:
            return named
    found = sorted(where.glob(f"{prefix}_{split}*_tog_format.json"))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise ConfigError(f"{where} holds several {dataset} {split!r} files ({names}); name one as the "
                          f"split, e.g. --split {found[0].stem}")
    if not found:
        raise DataError(f"no {dataset} file for split {split!r} ({prefix}_{split}*_tog_format.json, or a "
                        "file the split names; is the data directory complete?)", where)
    return found[0]


def _line_index(path: Path, key: str) -> dict[str, int]:
    """id → line of ``"key": "id"`` in a JSON file (for error messages)."""
    out: dict[str, int] = {}
    needle = f'"{key}":'
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            start = line.find(needle)
            while start >= 0:
                rest = line[start + len(needle):].lstrip()
                if rest.startswith('"'):
                    out.setdefault(rest[1:].split('"', 1)[0], lineno)
                start = line.find(needle, start + 1)
    return out


def _text(rec: dict[str, Any], key: str) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {key!r} missing or not a non-empty string")
    return value


def _records(path: Path) -> list[Any]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError("expected a JSON array of questions", path, 1)
    return data


def _read(path: Path, dataset: str, split: str, id_key: str, text_key: str) -> list[Question]:
    records = _records(path)
    lines: dict[str, int] | None = None
    out = []
    for k, rec in enumerate(records):
        qid = rec.get(id_key) if isinstance(rec, dict) else None
        try:
            if not isinstance(rec, dict):
                raise ValueError("record is not an object")
            answers = rec["answer"]
            names = [answers] if isinstance(answers, str) else list(answers)
            if not all(a is None or isinstance(a, str) for a in names):
                raise ValueError(f"answer {answers!r} is not a name or list of names")
            topic = rec["topic_entity"]
            if not isinstance(topic, dict) or not all(isinstance(v, str) for v in topic.values()):
                raise ValueError("topic_entity is not a {mid: name} object")
            q = Question(
                id=_text(rec, id_key),
                text=_text(rec, text_key),
                gold=tuple(a for a in names if a is not None and a.strip()),
                topic_entities=tuple(topic.values()),
                dataset=dataset,
                split=split,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if lines is None:
                lines = _line_index(path, id_key)
            line = lines.get(str(qid)) if qid is not None else None
            raise DataError(f"question #{k} ({qid}): malformed record ({exc})", path, line) from exc
        out.append(q)
    return out


def load_webqsp(root: Path, split: str) -> list[Question]:
    """WebQSP questions of ``split`` (ToG format; :func:`split_file`)."""
    return _read(split_file(root, "webqsp", split), "webqsp", split, "QuestionId", "RawQuestion")


def load_cwq(root: Path, split: str) -> list[Question]:
    """CWQ questions of ``split`` (ToG format; :func:`split_file`: the shared data's 200-question test
    sample, or the file the split names)."""
    return _read(split_file(root, "cwq", split), "cwq", split, "ID", "question")
