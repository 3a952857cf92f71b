"""`eval uag` on the user's formats: WebQSP exported by `eval data export` gives the figures of
`--dataset webqsp`; questions that cannot be aligned are counted and named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.datasets.user import read_candidates, read_generations, read_questions
from kgwise.errors import DataError
from kgwise.eval.uag.experiment import METHODS, load_user_data

runner = CliRunner()


@pytest.mark.slow
def test_exported_webqsp_gives_the_same_figures(data_dir: Path, tmp_path: Path) -> None:
    q, g, c = tmp_path / "q.jsonl", tmp_path / "g.jsonl", tmp_path / "c.jsonl"
    out = runner.invoke(app, ["eval", "data", "export", "--dataset", "webqsp", "--questions", str(q),
                              "--generations", str(g), "--candidates", str(c), "--data", str(data_dir)])
    assert out.exit_code == 0, out.output
    assert len(read_questions(q)) == len(read_generations(g)) == len(read_candidates(c)) == 1628
    common = ["--limit", "20", "--splits", "2", "--alphas", "0.3,0.5", "--data", str(data_dir)]
    own, ref = tmp_path / "own.json", tmp_path / "ref.json"
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    res = runner.invoke(app, ["eval", "uag", "--questions", str(q), "--kg", str(kg), "--generations", str(g),
                              "--candidates", str(c), *common, "--json", str(own)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["eval", "uag", "--dataset", "webqsp", *common, "--json", str(ref)])
    assert res.exit_code == 0, res.output
    a, b = json.loads(own.read_text()), json.loads(ref.read_text())
    for method in METHODS:
        assert a[method] == b[method], method
    for key in ("questions", "gold_retrievable", "gnn_gold_in_candidates", "gnn_candidates_merged"):
        assert a["meta"][key] == b["meta"][key], key
    # the paper's rows and size targets only on WebQSP itself
    assert "paper uag" in b["table6_markdown"] and "paper" not in a["table6_markdown"]
    assert "paper_table6_webqsp" not in a["meta"] and a["meta"]["data"] == "own"
    assert all(r["paper_size"] is None for t in a["targets"].values() for r in t["per_alpha"].values())


def _files(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    kg = tmp_path / "kg.tsv"
    kg.write_text("aspirin\ttreats\theadache\nibuprofen\ttreats\tfever\n", encoding="utf-8")
    q = tmp_path / "q.jsonl"
    q.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "q1", "text": "What treats headache?", "gold": ["aspirin"], "topic_entities": ["headache"]},
        {"id": "q2", "text": "What treats fever?", "gold": ["ibuprofen"], "topic_entities": ["fever"]},
        {"id": "q3", "text": "What treats gout?", "topic_entities": ["gout"]},
    ]), encoding="utf-8")
    g = tmp_path / "g.jsonl"
    g.write_text('{"id": "q1", "answer": "aspirin"}\n{"id": "q3", "answer": "colchicine"}\n'
                 '{"id": "q9", "answer": "x"}\n', encoding="utf-8")
    c = tmp_path / "c.jsonl"
    c.write_text('{"id": "q1", "candidates": [["Aspirin", 0.9], ["ibuprofen", 0.2]]}\n'
                 '{"id": "q3", "candidates": []}\n', encoding="utf-8")
    return kg, q, g, c


def test_unaligned_questions_are_counted_and_named(tmp_path: Path) -> None:
    kg, q, g, c = _files(tmp_path)
    data = load_user_data(q, str(kg), g, c)
    assert [x.id for x in data.questions] == ["q1", "q3"]
    left = data.coverage["left_out"]
    assert left["no_generation"]["count"] == 1 and left["no_generation"]["first"] == ["q2"]
    assert left["unknown_generation"]["first"] == ["q9"]
    assert data.coverage["kept_anyway"]["no_gold"]["first"] == ["q3"]
    # a candidate is gold by name (normalised) when the record gives no gold ids
    assert data.gnn is not None and data.gnn.gold.tolist() == [True, False]
    assert data.single_answer is not None and data.single_answer.tolist() == [True, False]


def test_bad_candidates_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"id": "q1", "candidates": [["a", 0.5]]}\n{"id": "q2", "candidates": [["b"]]}\n',
                   encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.jsonl.*2.*candidates\[0\]"):
        read_candidates(bad)


def test_eval_uag_options_are_checked(tmp_path: Path) -> None:
    kg, q, g, _ = _files(tmp_path)
    res = runner.invoke(app, ["eval", "uag", "--questions", str(q), "--generations", str(g)])
    assert res.exit_code != 0 and "--kg" in res.output
    res = runner.invoke(app, ["eval", "uag", "--kg", str(kg)])
    assert res.exit_code != 0 and "--questions" in res.output
    res = runner.invoke(app, ["eval", "uag", "--dataset", "cwq"])
    assert res.exit_code != 0 and "--questions" in res.output
