"""OBQA and MedQA loaders on the real files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kgwise.datasets import load, load_openbook_facts
from kgwise.errors import DataError


@pytest.mark.parametrize(("split", "count"), [("train", 4_957), ("dev", 500), ("test", 500)])
def test_obqa_counts(data_dir: Path, split: str, count: int) -> None:
    qs = load("obqa", split, data_dir)
    assert len(qs) == count
    assert all([c.label for c in q.choices] == list("ABCD") and len(q.gold) == 1 for q in qs)
    assert all(q.context == "" and q.dataset == "obqa" for q in qs)


def test_obqa_fields_and_facts(data_dir: Path) -> None:
    q = load("obqa", "train", data_dir)[0]
    assert (q.id, q.text, q.gold) == ("7-980", "The sun is responsible for", ("D",))
    assert q.choices[3].text == "plants sprouting, blooming and wilting"
    facts = load_openbook_facts(data_dir)
    assert len(facts) == 1_326
    assert facts[0] == "A bee is a pollinating animal"
    assert not any(f.startswith('"') or f.endswith('"') for f in facts)


def test_obqa_malformed(data_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(data_dir / "obqa" / "Main", tmp_path / "obqa" / "Main")
    path = tmp_path / "obqa" / "Main" / "test.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[9])
    rec["question"]["choices"][1]["label"] = "A"
    lines[9] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="duplicate choice labels") as err:
        load("obqa", "test", tmp_path)
    assert err.value.line == 10
    facts = tmp_path / "obqa" / "Main" / "openbook.txt"
    facts.write_text('"a fact"\n\n"another"\n')
    with pytest.raises(DataError) as err:
        load_openbook_facts(tmp_path)
    assert err.value.path == str(facts) and err.value.line == 2


def test_medqa(data_dir: Path) -> None:
    qs = load("medqa", "test", data_dir)
    assert len(qs) == 1_273
    raw = [json.loads(x) for x in (data_dir / "medqa" / "test.jsonl").read_text().splitlines()]
    for q, r in zip(qs, raw, strict=True):
        assert [c.label for c in q.choices] == list(r["options"])
        assert q.gold == (r["answer_idx"],)
        assert q.choices[q.gold_index].text == r["answer"]
    assert len({q.id for q in qs}) == 1_273 and qs[0].id == "medqa-test-1"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: {**d, "answer_idx": "F"},
        lambda d: {**d, "options": []},
        lambda d: {**d, "options": {**d["options"], "B": ""}},
        lambda d: {k: v for k, v in d.items() if k != "question"},
    ],
)
def test_medqa_malformed(data_dir: Path, tmp_path: Path, mutate: object) -> None:
    (tmp_path / "medqa").mkdir()
    lines = (data_dir / "medqa" / "test.jsonl").read_text().splitlines()[:3]
    lines[1] = json.dumps(mutate(json.loads(lines[1])))  # type: ignore[operator]
    path = tmp_path / "medqa" / "test.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as err:
        load("medqa", "test", tmp_path)
    assert err.value.path == str(path) and err.value.line == 2
