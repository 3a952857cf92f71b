"""``kgwise kg index build`` and ``kgwise kg ground``: aliases, fuzzy links with method and score, topic
entities, and a refused index of another graph."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.kg import CSRGraph

runner = CliRunner()


def test_index_build_and_ground(tmp_path: Path, data_dir: Path) -> None:
    graph = tmp_path / "ddb.npz"
    result = runner.invoke(app, ["kg", "build", str(data_dir / "ddb"), "-f", "ddb", "-o", str(graph)])
    assert result.exit_code == 0 and "7,400 aliases" in " ".join(result.output.split()), result.output
    index = tmp_path / "ddb.idx"
    result = runner.invoke(app, ["kg", "index", "build", str(graph), "--out", str(index), "--hub-stats"])
    assert result.exit_code != 0 and "always gives them" in " ".join(result.output.split())
    result = runner.invoke(app, ["kg", "index", "build", str(graph), "--out", str(index)])
    assert result.exit_code == 0, result.output
    for extra in ([], ["--index", str(index)]):
        out = tmp_path / "g.json"
        result = runner.invoke(app, ["kg", "ground", "is levothyroxine or aspirn good for gowt", "--kg",
                                     str(graph), *extra, "--json", str(out)])
        assert result.exit_code == 0, result.output
        report = json.loads(out.read_text())
        links = {x["mention"]: (x["label"], x["method"]) for x in report["links"]}
        assert links["levothyroxine"] == ("Thyroxine", "alias")
        assert "Thyroxine" in report["topic_entities"]
    result = runner.invoke(app, ["kg", "ground", "aspirn", "--kg", str(graph), "--json", str(out)])
    assert json.loads(out.read_text())["links"][0] | {"score": 0} == {
        "mention": "aspirn", "node": CSRGraph.load(graph).node("Aspirin"), "name": "Aspirin",
        "method": "fuzzy", "score": 0, "label": "Aspirin", "start": 0, "end": 6}
    other = CSRGraph.from_triples([("a", "r", "b")]).save(tmp_path / "o.npz")
    result = runner.invoke(app, ["kg", "ground", "aspirin", "--kg", str(other), "--index", str(index)])
    assert result.exit_code != 0 and "another graph" in " ".join(result.output.split())
    result = runner.invoke(app, ["kg", "neighbors", str(graph), "aspirn"])
    assert result.exit_code != 0 and "did you mean 'Aspirin'" in " ".join(result.output.split())


def test_ground_keeps_method_and_score_and_a_config_threshold_drops_low_links(tmp_path: Path) -> None:
    graph = CSRGraph.from_triples([("Mount Kilimanjaro", "located in", "Tanzania"),
                                   ("United States", "borders", "Canada")],
                                  aliases={"United States": ["US"]}).save(tmp_path / "g.npz")
    out = tmp_path / "g.json"
    text = "Is kilimanjaro used by the US or Tanzania?"
    result = runner.invoke(app, ["kg", "ground", text, "--kg", str(graph), "--json", str(out)])
    assert result.exit_code == 0, result.output
    found = json.loads(out.read_text())["links"]
    links = {x["mention"]: (x["label"], x["method"], x["score"]) for x in found}
    # "used" is no US; the partial name scores 0.9
    assert links == {"kilimanjaro": ("Mount Kilimanjaro", "partial", 0.9),
                     "US": ("United States", "alias", 1.0), "Tanzania": ("Tanzania", "exact", 1.0)}
    config = tmp_path / "kgwise.toml"
    config.write_text("[linking]\nmin_score = 0.95\n", encoding="utf-8")
    result = runner.invoke(app, ["kg", "ground", text, "--kg", str(graph), "--config", str(config), "--json",
                                 str(out)])
    assert result.exit_code == 0, result.output
    assert [x["mention"] for x in json.loads(out.read_text())["links"]] == ["US", "Tanzania"]
    config.write_text("[linking]\nmin_score = 2\n", encoding="utf-8")
    result = runner.invoke(app, ["kg", "ground", text, "--kg", str(graph), "--config", str(config)])
    assert result.exit_code != 0 and "min_score" in " ".join(result.output.split())
