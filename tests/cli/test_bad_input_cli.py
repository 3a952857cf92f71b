"""Bad command lines end in one error line and exit code 2, before any work is done."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.kg import CSRGraph

runner = CliRunner()


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    return CSRGraph.from_triples([("aspirin", "treats", "pain"), ("insulin", "treats", "diabetes")]).save(
        tmp_path / "g.npz")


def said(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, " ".join(result.output.replace("│", " ").split())  # undo the box and wrapping


@pytest.mark.parametrize("args, message", [
    (["eval", "llm", "--dataset", "obqa", "--split", "test", "--limit", "-3"], "--limit"),
    (["eval", "knowgpt", "--dataset", "obqa", "--train-limit", "0"], "--train-limit"),
    (["route", "settle", "d" * 32, "--correct"], "and --cost C"),
    (["route", "settle", "d" * 32, "--grade", "0.5", "--cost", "0", "--observed", "gnn"],
     "--observed 'gnn': expected ARM=NUMBER"),
    (["route", "select", "q", "--cost", "big"], "--cost 'big': expected ARM=NUMBER"),
    (["route", "cancel", "d" * 32, "--json", "kgwise.toml"], "--json kgwise.toml is also --config"),
    (["serve", "--port", "70000"], "--port"),
    (["serve", "--state", "st"], "Missing option '--config'"),
    (["serve", "--config", "no-such.toml"], "'--config': file 'no-such.toml' does not exist"),
    (["ask", "", "--choices", "3|4"], "the question text is empty"),
    (["ask", "2 + 2?", "--choices", "4| 4 |5"], "the choice '4' is given twice"),
    (["eval", "uag", "--alphas", " , "], "--alphas: no values given"),
])
def test_bad_values_are_named(args: list[str], message: str) -> None:
    code, out = said(args)
    assert code == 2 and message in out, out


def test_an_unwritable_output_is_refused_before_the_work(graph_file: Path, tmp_path: Path) -> None:
    code, out = said(["eval", "data", "stats", "--json", str(tmp_path)])
    assert code == 2 and "is a directory, not a file" in out
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, out = said(["kg", "export", str(graph_file), "--out", str(blocker / "sub" / "g.nt")])
    assert code == 2 and "cannot create the folder" in out


def test_gzipped_n_triples_round_trip_and_a_broken_gzip_is_named(graph_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "g.nt.gz"
    code, text = said(["kg", "export", str(graph_file), "--out", str(out)])
    assert code == 0, text
    code, text = said(["kg", "stats", str(out)])
    assert code == 0 and "4 nodes, 2 edges, 1 relations" in text, text
    fake = tmp_path / "fake.nt.gz"
    fake.write_text("<a> <b> <c> .\n")
    code, text = said(["kg", "stats", str(fake)])
    assert code == 2 and "fake.nt.gz:1: not a complete gzip file" in text, text


def test_a_source_without_triples_is_not_a_graph(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n\n")
    code, out = said(["kg", "build", str(empty), "--format", "tsv", "--out", str(tmp_path / "g.npz")])
    assert code == 2 and "empty.tsv: no triples found (read as tsv)" in out, out
    assert not (tmp_path / "g.npz").exists()


def test_an_output_that_is_also_an_input_is_refused(graph_file: Path, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "1", "text": "What treats pain?", "gold": ["aspirin"], '
                         '"topic_entities": ["pain"]}\n')
    before = graph_file.read_bytes(), questions.read_text()
    code, out = said(["eval", "knowgpt", "--kg", str(graph_file), "--questions", str(questions), "--json",
                      str(questions)])
    assert code == 2 and f"--json {questions} is also --questions" in out, out
    train = ["kg", "model", "train", "--kg", str(graph_file), "--questions", str(questions)]
    code, out = said([*train, "--out", str(tmp_path / "m.pt"), "--json", str(tmp_path / "." / "m.pt")])
    assert code == 2 and "--json" in out and "is also --out" in out, out
    code, out = said(["kg", "export", str(graph_file), "--out", str(graph_file)])
    assert code == 2 and "is also GRAPH" in out, out
    assert (graph_file.read_bytes(), questions.read_text()) == before
    tsv = tmp_path / "g.tsv"
    tsv.write_text("a\tr\tb\n")
    code, out = said(["kg", "build", str(tsv), "--format", "tsv", "--out", str(graph_file)])
    assert code == 0, out  # a graph file may be rebuilt in place from other sources


def test_serve_names_a_bad_pipeline_config_before_serving(tmp_path: Path) -> None:
    (tmp_path / "kg.tsv").write_text("insulin\ttreats\tdiabetes\n", encoding="utf-8")
    cfg = tmp_path / "kgwise.toml"
    cfg.write_text('[kg]\ngraph = "kg.tsv"\n\n[[arms]]\nname = "a"\nkind = "llm"\nspec = "smollm2-135m"\n'
                   'colour = "red"\n\n[router]\nbudget_usd = 1\n', encoding="utf-8")
    code, out = said(["serve", "--config", str(cfg), "--state", str(tmp_path / "st")])
    assert code == 2 and "colour" in out, out
