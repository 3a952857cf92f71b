"""WebQSP and CWQ (ToG format) loaders on the real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.errors import ConfigError, DataError


def test_webqsp(data_dir: Path) -> None:
    qs = load("webqsp", "test", data_dir)
    raw = json.loads((data_dir / "webqsp" / "WebQSP_test_1639_tog_format.json").read_text())
    assert len(qs) == len(raw) == 1_639
    q = qs[0]
    assert (q.id, q.text) == ("WebQTest-1198", "who influenced samuel taylor coleridge?")
    assert q.topic_entities == ("Samuel Taylor Coleridge",)
    assert "Immanuel Kant" in q.gold and not q.choices and not q.is_multiple_choice
    for q, r in zip(qs, raw, strict=True):
        assert q.gold == tuple(a for a in r["answer"] if a)
        assert q.topic_entities == tuple(r["topic_entity"].values())


def test_cwq(data_dir: Path) -> None:
    qs = load("cwq", "test", data_dir)
    assert len(qs) == 200
    q = qs[0]
    assert q.id == "WebQTest-1923_e11655219d44e3762e0510f2bde1c077"
    assert q.gold == ("The Last Song",) and q.topic_entities == ("Fall Down",)
    assert q.text == 'What movies did the person who recorded "Fall Down" have parts in?'
    assert all(q.dataset == "cwq" and q.split == "test" and len(q.gold) == 1 for q in qs)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: {k: v for k, v in d.items() if k != "answer"},
        lambda d: {**d, "topic_entity": ["Fall Down"]},
        lambda d: {**d, "answer": 3},
        lambda d: {**d, "question": ""},
    ],
)
def test_cwq_malformed(data_dir: Path, tmp_path: Path, mutate: object) -> None:
    raw = json.loads((data_dir / "cwq" / "cwq_test_sample200_tog_format.json").read_text())[:3]
    raw[2] = mutate(raw[2])  # type: ignore[operator]
    (tmp_path / "cwq").mkdir()
    path = tmp_path / "cwq" / "cwq_test_sample200_tog_format.json"
    path.write_text(json.dumps(raw, indent=1))
    with pytest.raises(DataError, match=raw[2]["ID"]) as err:
        load("cwq", "test", tmp_path)
    text = path.read_text().splitlines()
    assert err.value.path == str(path)
    assert err.value.line is not None and raw[2]["ID"] in text[err.value.line - 1]


def test_webqsp_invalid_json(tmp_path: Path) -> None:
    (tmp_path / "webqsp").mkdir()
    path = tmp_path / "webqsp" / "WebQSP_test_1639_tog_format.json"
    path.write_text('[\n {"QuestionId": "x",\n  "answer": [}\n]')
    with pytest.raises(DataError, match="invalid JSON") as err:
        load("webqsp", "test", tmp_path)
    assert err.value.line == 3


def test_cwq_split_names_the_file(data_dir: Path, tmp_path: Path) -> None:
    """The file is found in the folder, not assumed: a full test set beside the sample makes 'test'
    ambiguous (both named), and either is read by naming it as the split."""
    raw = json.loads((data_dir / "cwq" / "cwq_test_sample200_tog_format.json").read_text())
    (tmp_path / "cwq").mkdir()
    (tmp_path / "cwq" / "cwq_test_sample200_tog_format.json").write_text(json.dumps(raw[:3]))
    assert len(load("cwq", "test", tmp_path)) == 3
    (tmp_path / "cwq" / "cwq_test_tog_format.json").write_text(json.dumps(raw[:5]))
    with pytest.raises(ConfigError, match=r"cwq_test_sample200_tog_format\.json, cwq_test_tog_format\.json"):
        load("cwq", "test", tmp_path)
    assert len(load("cwq", "cwq_test_tog_format", tmp_path)) == 5
    assert len(load("cwq", "cwq_test_sample200_tog_format.json", tmp_path)) == 3
    with pytest.raises(DataError, match="no cwq file for split 'dev'"):
        load("cwq", "dev", tmp_path)
