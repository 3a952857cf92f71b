"""``kgwise eval data stats`` and ``kgwise kg build``: smoke tests through the real command line app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.kg import CSRGraph
from kgwise.kg.clean import BuildReport, merge_names
from kgwise.kg.loaders import load_ddb, load_tsv, merge_graphs

runner = CliRunner()

EXPECTED = {
    "csqa": {"train": 9_741, "dev": 1_221, "test": 1_140, "ihtrain": 8_500, "ihdev": 1_221, "ihtest": 1_241},
    "obqa": {"train": 4_957, "dev": 500, "test": 500, "openbook_facts": 1_326},
    "medqa": {"test": 1_273},
    "webqsp": {"test": 1_639},
    "cwq": {"test": 200},
}


def test_data_stats(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats.json"
    result = runner.invoke(app, ["eval", "data", "stats", "--data", str(data_dir), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == EXPECTED
    for text in ("ihtest", "1,241", "8,500", "open-book facts", "1,326", "1,639"):
        assert text in result.output


def test_data_stats_bad_data_dir(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "data", "stats", "--data", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "does not exist" in result.output
    result = runner.invoke(app, ["eval", "data", "stats", "--data", str(tmp_path)])
    assert result.exit_code == 2 and "no benchmark data set found" in result.output


def test_data_stats_lists_what_is_there(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "obqa").symlink_to(data_dir / "obqa")
    out = tmp_path / "stats.json"
    result = runner.invoke(app, ["eval", "data", "stats", "--data", str(tmp_path), "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["obqa"] == EXPECTED["obqa"]
    assert str(report["csqa"]["dev"]).startswith("missing: ") and "missing" in result.output


def test_data_export_round_trips_through_the_user_formats(data_dir: Path, tmp_path: Path) -> None:
    from kgwise.datasets import load
    from kgwise.datasets.user import read_graded_log, read_questions

    qs, log = tmp_path / "q.jsonl", tmp_path / "log.jsonl"
    result = runner.invoke(app, ["eval", "data", "export", "--dataset", "webqsp", "--questions", str(qs),
                                 "--log", str(log), "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    back = read_questions(qs)
    original = load("webqsp", "test", data_dir)
    assert [(q.id, q.text, q.gold, q.topic_entities) for q in back] == [
        (q.id, q.text, q.gold, q.topic_entities) for q in original]
    graded = read_graded_log(log)
    assert len(graded.questions) == 1578 and len(graded.arms) == 7
    assert "ReaRev-lmsr:KGM:" in result.output
    result = runner.invoke(app, ["eval", "data", "export", "--dataset", "obqa", "--log", str(log)])
    assert result.exit_code == 2 and "webqsp/test only" in result.output


def test_kg_build_merged_and_inspect(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ddb_fb.npz"
    result = runner.invoke(app, [
        "kg", "build", str(data_dir / "ddb"), str(data_dir / "webqsp" / "freebase_fragment.tsv"),
        "--format", "ddb", "--format", "tsv", "--out", str(out),
    ])
    assert result.exit_code == 0, result.output
    g = CSRGraph.load(out)
    # freebase names equal up to case/underscores are one node once merged, so a few edges collapse; then
    # names that mean one node are merged (a label that is another node's alias, "Cholic acid" and
    # "Cholic-acid", "Cerebral edema" and "Cerebral oedema"), and the fragment's self-loops dropped, as
    # `kgwise kg build` does
    report = BuildReport()
    ref = merge_names(merge_graphs([load_ddb(data_dir / "ddb"), load_tsv(
        data_dir / "webqsp" / "freebase_fragment.tsv", report=report)]), report)
    assert len(report.merged) == 75 and f"{report.summary()}" in " ".join(result.output.split())
    assert (g.num_nodes, g.num_edges, g.num_relations) == (ref.num_nodes, ref.num_edges, 15 + 1_274)
    assert 95_000 < g.num_edges <= 49_974 + 46_040
    assert list(g.labels) == list(ref.labels) and g.name == "ddb+freebase_fragment"
    flat = " ".join(result.output.split())  # the console wraps long lines (tmp paths differ in length)
    assert "ddb" in flat and "46,015 edges" in flat and "25 self loops" in flat  # of 46,040 lines
    result = runner.invoke(app, ["kg", "stats", str(out)])
    assert result.exit_code == 0 and f"{g.num_nodes:,} nodes" in " ".join(result.output.split())
    result = runner.invoke(app, ["kg", "neighbors", str(out), "Simvastatin"])
    assert result.exit_code == 0 and "-[may treat]-> Hyperlipidemia" in result.output


def test_kg_build_conceptnet_slice_merged_relations(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cn"
    result = runner.invoke(app, [
        "kg", "build", str(data_dir / "conceptnet" / "csqa_choice_triples_jessionlin"),
        "-f", "conceptnet-slice",
        "--merge-relations", str(data_dir / "conceptnet" / "merge_relation_kagnet.txt"), "-o", str(out),
        "--name", "cn-slice",
    ])
    assert result.exit_code == 0, result.output
    g = CSRGraph.load(tmp_path / "cn.npz")
    assert (g.name, g.num_edges, g.num_relations) == ("cn-slice", 7_530, 8)


def test_kg_build_wordnet_frequent_senses(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "wn.npz"
    result = runner.invoke(app, ["kg", "build", str(data_dir / "wordnet"), "-f", "wordnet",
                                 "--wordnet-senses", "frequent", "-o", str(out)])
    assert result.exit_code == 0, result.output
    g = CSRGraph.load(out)
    assert g.num_edges == 540_623 - (206_941 - 167_181)  # the rare word senses' edges are left out


def test_kg_build_errors(data_dir: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "x.npz")
    result = runner.invoke(app, ["kg", "build", str(data_dir / "ddb"), "-f", "owl", "-o", out])
    assert result.exit_code == 2 and "unknown KG format" in result.output
    result = runner.invoke(app, ["kg", "build", str(data_dir / "ddb"), "-f", "ddb", "--wordnet-senses",
                                 "frequent", "-o", out])
    assert result.exit_code == 2 and "applies to a wordnet source" in result.output
    result = runner.invoke(app, ["kg", "build", str(data_dir / "wordnet"), "-f", "wordnet",
                                 "--wordnet-senses", "rare", "-o", out])
    assert result.exit_code == 2 and "'all' or 'frequent'" in result.output
    result = runner.invoke(app, ["kg", "build", str(data_dir / "ddb"), str(data_dir / "ddb"), "-f", "ddb",
                                 "-f", "tsv", "-f", "tsv", "-o", out])
    assert result.exit_code == 2 and "once per source" in result.output
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\tc\nd\te\n")
    # a broken line is named and counted, and the build goes on; --strict stops at it
    result = runner.invoke(app, ["kg", "build", str(bad), "-f", "tsv", "-o", out, "--strict"])
    assert result.exit_code == 2 and "bad.tsv:2" in result.output.replace("\n", "")
    assert not Path(out).exists()
    result = runner.invoke(app, ["kg", "build", str(bad), "-f", "tsv", "-o", out])
    assert result.exit_code == 0 and "bad.tsv:2" in result.output.replace("\n", "")
    assert "1 broken lines" in " ".join(result.output.split()) and Path(out).exists()
    Path(out).unlink()
    # error text with brackets reaches the user intact (not eaten as console markup)
    ddb = tmp_path / "ddb"
    ddb.mkdir()
    (ddb / "ddb_names.json").write_text('{"Aspirin": ["1"]}')
    (ddb / "ddb_relas.json").write_text("{}")
    result = runner.invoke(app, ["kg", "build", str(ddb), "-f", "ddb", "-o", out])
    assert result.exit_code == 2 and '[id, "0"|"1"]' in result.output.replace("\n", "")
