"""UAG on your own KG and questions — ``kgwise eval uag --questions --kg --generations`` — on real WebQSP
questions over the Freebase fragment. (A UAG set for a new open question is the pipeline's: ``[answer_sets]
uag_llm``, ``kgwise fit``, ``kgwise ask``; tested in ``tests/app/test_open_sets.py``.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kgwise.cli.main import app

runner = CliRunner()


def said(result: Result) -> str:
    """The command's output with the console's line wrapping undone."""
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def inputs(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 WebQSP test questions (JSONL) and RoG/LLaMA2's recorded answers to them."""
    from kgwise.eval.uag.experiment import load_webqsp_data

    wq = load_webqsp_data(data_dir, limit=120)
    assert wq.generations is not None  # the WebQSP inputs come with RoG's recorded generations
    out = tmp_path_factory.mktemp("uag-inputs")
    with (out / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for q in wq.questions:
            fh.write(json.dumps({"id": q.id, "text": q.text, "gold": list(q.gold),
                                 "topic_entities": list(q.topic_entities)}) + "\n")
    with (out / "generations.jsonl").open("w", encoding="utf-8") as fh:
        for q in wq.questions:
            fh.write(json.dumps({"id": q.id, "answer": wq.generations[q.id]}) + "\n")
    return out


def test_eval_uag_over_rog_data_equals_the_same_graph_as_a_file(
    inputs: Path, data_dir: Path, tmp_path: Path, rog_writer: Callable[..., Path]
) -> None:
    """RoG's release format (Parquet shards holding each question's subgraph) as --kg: the union of the
    2-hop subgraphs holds every path a 2-hop retrieval from the topic entities can take, so every figure
    equals the one over the whole Freebase fragment."""
    from kgwise.datasets.user import read_questions
    from kgwise.kg.loaders import load_tsv

    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    rog = rog_writer(read_questions(inputs / "questions.jsonl"), load_tsv(kg), tmp_path / "rog")
    reports = []
    for graph in (kg, rog):
        report = tmp_path / f"{graph.name}.json"
        result = runner.invoke(app, ["eval", "uag", "--kg", str(graph), "--questions",
                                     str(inputs / "questions.jsonl"),
                                     "--generations", str(inputs / "generations.jsonl"), "--alphas", "0.4",
                                     "--splits", "2", "--json", str(report)])
        assert result.exit_code == 0, result.output
        out = json.loads(report.read_text())
        reports.append({k: v for k, v in out.items() if k not in ("meta", "table6_markdown", "plots")})
    assert reports[0] == reports[1] and "uag" in reports[0]


def test_eval_uag_rejects_bad_own_data(inputs: Path, data_dir: Path, tmp_path: Path) -> None:
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    base = ["eval", "uag", "--kg", str(kg)]
    q = ["--questions", str(inputs / "questions.jsonl")]
    both = runner.invoke(app, [*base, *q, "--generations", str(inputs / "generations.jsonl"), "--llm", "x"])
    assert both.exit_code == 2 and "exactly one" in said(both)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "q?", "gold": ["x"], "topic_entities": ["Jamaica"]}\n'
                   '{"id": 1, "txt": 2}\n')
    result = runner.invoke(app, [*base, "--questions", str(bad), "--generations", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl" in said(result) and "2" in said(result)
    wrong = tmp_path / "g.txt"
    wrong.write_text("x")
    result = runner.invoke(app, ["eval", "uag", "--kg", str(wrong), *q, "--generations",
                                 str(inputs / "generations.jsonl")])
    assert result.exit_code == 2 and ".npz" in said(result)
