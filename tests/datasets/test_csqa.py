"""CSQA loader: official and in-house split counts on the real files, fields, malformed input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.errors import ConfigError, DataError

COUNTS = {"train": 9_741, "dev": 1_221, "test": 1_140, "ihtrain": 8_500, "ihdev": 1_221, "ihtest": 1_241}


@pytest.mark.parametrize(("split", "count"), COUNTS.items())
def test_counts(data_dir: Path, split: str, count: int) -> None:
    qs = load("csqa", split, data_dir)
    assert len(qs) == count
    assert all(q.dataset == "csqa" and q.split == split for q in qs)
    assert all([c.label for c in q.choices] == list("ABCDE") for q in qs)
    assert all(q.concept for q in qs)
    if split == "test":
        assert not any(q.gold for q in qs)
    else:
        assert all(len(q.gold) == 1 and q.gold[0] in "ABCDE" for q in qs)


def test_inhouse_split(data_dir: Path) -> None:
    train = load("csqa", "train", data_dir)
    ih_train, ih_test = load("csqa", "ihtrain", data_dir), load("csqa", "ihtest", data_dir)
    listed = (data_dir / "csqa" / "inhouse_split_qids.txt").read_text().split()
    assert {q.id for q in ih_train} == set(listed)
    assert {q.id for q in ih_train}.isdisjoint(q.id for q in ih_test)
    assert {q.id for q in ih_train} | {q.id for q in ih_test} == {q.id for q in train}
    assert [q.id for q in load("csqa", "ihdev", data_dir)] == [q.id for q in load("csqa", "dev", data_dir)]


def test_fields(data_dir: Path) -> None:
    q = load("csqa", "dev", data_dir)[0]
    assert q.id == "1afa02df02c908a558b4036e80242fac"
    assert q.text.startswith("A revolving door is convenient for two direction travel")
    assert q.concept == "revolving door"
    assert q.choices[0].text == "bank" and q.gold == ("A",) and q.gold_index == 0
    assert q.context == "" and q.topic_entities == ()


def copy_csqa(data_dir: Path, tmp_path: Path) -> Path:
    shutil.copytree(data_dir / "csqa", tmp_path / "csqa")
    return tmp_path


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: {**d, "answerKey": "Z"},
        lambda d: {k: v for k, v in d.items() if k != "answerKey"},
        lambda d: {**d, "question": {**d["question"], "stem": ""}},
        lambda d: {**d, "question": {**d["question"], "choices": []}},
        lambda d: {**d, "question": {k: v for k, v in d["question"].items() if k != "question_concept"}},
        lambda d: "not json",
    ],
)
def test_malformed_line(data_dir: Path, tmp_path: Path, mutate: object) -> None:
    root = copy_csqa(data_dir, tmp_path)
    path = root / "csqa" / "dev_rand_split.jsonl"
    lines = path.read_text().splitlines()
    new = mutate(json.loads(lines[4]))  # type: ignore[operator]
    lines[4] = new if isinstance(new, str) else json.dumps(new)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load("csqa", "ihdev", root)
    assert err.value.path == str(path) and err.value.line == 5


def test_inhouse_ids_must_be_train_ids(data_dir: Path, tmp_path: Path) -> None:
    root = copy_csqa(data_dir, tmp_path)
    ids = root / "csqa" / "inhouse_split_qids.txt"
    ids.write_text(ids.read_text() + "not-a-train-id\n")
    with pytest.raises(DataError, match="not-a-train-id"):
        load("csqa", "ihtrain", root)
    ids.write_text("a\nb\na\n")
    with pytest.raises(DataError) as err:
        load("csqa", "ihtest", root)
    assert err.value.line == 3


def test_bad_name_split_and_dirs(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown split"):
        load("csqa", "validation", data_dir)
    with pytest.raises(ConfigError, match="unknown data set"):
        load("commonsenseqa", "dev", data_dir)
    with pytest.raises(ConfigError, match="does not exist"):
        load("csqa", "dev", tmp_path / "missing")
    monkeypatch.delenv("KGWISE_DATA", raising=False)
    with pytest.raises(ConfigError, match="no data directory"):
        load("csqa", "dev")
    monkeypatch.setenv("KGWISE_DATA", str(data_dir))
    assert len(load("csqa", "dev")) == 1_221
    with pytest.raises(DataError, match="not found"):
        load("csqa", "dev", tmp_path)  # a directory without csqa/
