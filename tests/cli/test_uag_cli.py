"""``kgwise uag calibrate`` / ``kgwise uag answer`` on real WebQSP questions over the Freebase fragment."""

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


def test_calibrate_then_answer(inputs: Path, data_dir: Path, tmp_path: Path) -> None:
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    out, report = tmp_path / "uag.json", tmp_path / "summary.json"
    args = ["uag", "calibrate", "--kg", str(kg), "--questions", str(inputs / "questions.jsonl"),
            "--generations", str(inputs / "generations.jsonl"), "--alpha", "0.4", "--out", str(out),
            "--work", str(tmp_path / "work"), "--json", str(report)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(report.read_text())
    assert summary["certified"] and summary["tuning"] + summary["calibration"] == summary["questions"]
    assert summary["calibration_miss_rate"] <= 0.4 and summary["generator"].startswith("recorded:")
    saved = json.loads(out.read_text())
    assert saved["kind"] == "kgwise.CalibratedUAG" and saved["uag"]["alpha"] == 0.4

    # recorded generations cannot answer a new question: the generator must be named
    ask = ["uag", "answer", "what does jamaican people speak?", "--topic", "Jamaica", "--kg", str(kg),
           "--uag", str(out)]
    result = runner.invoke(app, ask)
    assert result.exit_code == 2 and "pass --llm" in said(result)
    result = runner.invoke(app, [*ask, "--llm", "smollm2-135m", "--json", str(tmp_path / "a.json")])
    assert result.exit_code == 0, result.output
    answer = json.loads((tmp_path / "a.json").read_text())
    assert answer["alpha"] == 0.4 and answer["generation"] and "guarantee assumes" in said(result)
    assert answer["guaranteed"] is False and "only if smollm2-135m answers like" in said(result)
    from kgwise.kg.loaders import load_tsv

    graph = load_tsv(kg)
    assert all(graph.find(a) is not None for a in answer["answers"])  # KG labels, not free text

    # an unknown topic entity is named, not answered with an empty set
    result = runner.invoke(app, [*ask[:4], "No Such Entity 123", *ask[5:], "--llm", "smollm2-135m"])
    assert result.exit_code == 2 and "No Such Entity 123" in said(result)
    # beside a known one it is named in a warning and in the report
    result = runner.invoke(app, [*ask, "--topic", "No Such Entity 123", "--llm", "smollm2-135m", "--json",
                                 str(tmp_path / "b.json")])
    assert result.exit_code == 0 and "'No Such Entity 123' is not in the KG" in said(result), result.output
    both = json.loads((tmp_path / "b.json").read_text())
    assert both["unknown_topic_entities"] == ["No Such Entity 123"] and both["answers"] == answer["answers"]
    assert answer["unknown_topic_entities"] == []

    # without --topic the grounder proposes the topic entities, and the answer reports them
    result = runner.invoke(app, ["uag", "answer", "what language is spoken in jamaica?", "--kg", str(kg),
                                 "--uag", str(out), "--llm", "smollm2-135m",
                                 "--json", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    proposed = json.loads((tmp_path / "c.json").read_text())["topic_entities_proposed"]
    assert "Jamaica" in [p["label"] for p in proposed] and "(proposed)" in said(result)
    assert all(p["method"] in ("exact", "alias", "fuzzy") and 0 < p["score"] <= 1 for p in proposed)


def test_calibrate_takes_the_uag_table_of_a_config_file(inputs: Path, data_dir: Path, tmp_path: Path) -> None:
    """The grid, the FWER procedure and α from --config; --delta given on the command line wins."""
    config = tmp_path / "kgwise.toml"
    config.write_text("[uag]\nalpha = 0.4\nsteps = [0.1, 0.1, 0.05]\n\n[uag.ltt]\nfwer = 'bonferroni'\n"
                      "delta = 0.2\n", encoding="utf-8")
    out = tmp_path / "uag.json"
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    result = runner.invoke(app, ["uag", "calibrate", "--kg", str(kg),
                                 "--questions", str(inputs / "questions.jsonl"),
                                 "--generations", str(inputs / "generations.jsonl"), "--out", str(out),
                                 "--delta", "0.1", "--work", str(tmp_path / "work"), "--config", str(config)])
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())["uag"]
    assert saved["alpha"] == 0.4 and saved["steps"] == [0.1, 0.1, 0.05]
    assert saved["ltt"] == {"delta": 0.1, "fwer": "bonferroni", "p_value": "binomial"}


def test_calibrate_on_rog_data_equals_the_same_graph_and_questions_as_files(
    inputs: Path, data_dir: Path, tmp_path: Path, rog_writer: Callable[..., Path]
) -> None:
    """RoG's release format (Parquet shards holding each question's subgraph) as --kg and --questions: the
    union of the 2-hop subgraphs holds every path a 2-hop retrieval from the topic entities can take, so
    the calibration equals the one over the whole Freebase fragment."""
    from kgwise.cli.uag import read_questions
    from kgwise.kg.loaders import load_tsv

    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    rog = rog_writer(read_questions(inputs / "questions.jsonl"), load_tsv(kg), tmp_path / "rog")
    summaries = []
    shards = rog / "test-*.parquet"  # a glob pattern of the release's shards
    for graph, questions in ((kg, inputs / "questions.jsonl"), (rog, shards)):
        report = tmp_path / f"{graph.name}.json"
        result = runner.invoke(app, ["uag", "calibrate", "--kg", str(graph), "--questions", str(questions),
                                     "--generations", str(inputs / "generations.jsonl"), "--alpha", "0.4",
                                     "--out", str(tmp_path / "u.json"), "--work", str(tmp_path / "work"),
                                     "--json", str(report)])
        assert result.exit_code == 0, result.output
        summaries.append({k: v for k, v in json.loads(report.read_text()).items()
                          if k not in ("kg", "questions_file", "made_with")})
    assert summaries[0] == summaries[1] and summaries[0]["certified"]


def test_calibrate_rejects_bad_input(inputs: Path, data_dir: Path, tmp_path: Path) -> None:
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    base = ["uag", "calibrate", "--kg", str(kg), "--out", str(tmp_path / "u.json")]
    q = ["--questions", str(inputs / "questions.jsonl")]
    both = runner.invoke(app, [*base, *q, "--generations", str(inputs / "generations.jsonl"), "--llm", "x"])
    assert both.exit_code == 2 and "exactly one" in said(both)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "q?", "gold": ["x"], "topic_entities": ["Jamaica"]}\n'
                   '{"id": 1, "txt": 2}\n')
    result = runner.invoke(app, [*base, "--questions", str(bad), "--generations", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl" in said(result) and "2" in said(result)
    result = runner.invoke(app, [*base, *q, "--generations", str(inputs / "generations.jsonl"),
                                 "--alpha", "0.01", "--work", str(tmp_path / "w")])
    # 70 calibration questions cannot certify α = 0.01 at δ = 0.05 (299 needed): said before any table
    assert result.exit_code == 2 and "needs at least 299 calibration questions" in said(result)
    assert not (tmp_path / "w").exists()
    # recorded answers that leave a question out, or belong to no question; a topic entity not in the KG
    rows = (inputs / "generations.jsonl").read_text().splitlines()
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join([*rows[1:], '{"id": "zzz", "answer": "x"}']) + "\n")
    result = runner.invoke(app, [*base, *q, "--generations", str(partial)])
    missing = json.loads(rows[0])["id"]
    assert result.exit_code == 2 and "partial.jsonl: no recorded answer for 1 of" in said(result)
    assert missing in said(result)
    typo = tmp_path / "typo.jsonl"
    typo.write_text('{"id": "t", "text": "Capital of Elbonia?", "gold": ["x"], '
                    '"topic_entities": ["Elbonia"]}\n')
    with partial.open("a") as fh:
        fh.write('{"id": "t", "answer": "x"}\n')
    result = runner.invoke(app, [*base, "--questions", str(typo), "--generations", str(partial)])
    assert "1 topic entities of 1 questions are not in the KG (t: 'Elbonia')" in said(result)
    assert "answers in" in said(result) and "belong to no question" in said(result)
    assert not (tmp_path / "u.json").exists()
    wrong = tmp_path / "g.txt"
    wrong.write_text("x")
    result = runner.invoke(app, ["uag", "calibrate", "--kg", str(wrong), *q, "--llm", "smollm2-135m",
                                 "--out", str(tmp_path / "u.json")])
    assert result.exit_code == 2 and ".npz" in said(result)
