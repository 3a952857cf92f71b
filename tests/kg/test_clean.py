"""A graph cleaned at build: header rows, broken lines (counted or --strict), duplicates, self-loops,
dangling and conflicting aliases, names merged; `kgwise kg build --report`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.errors import DataError
from kgwise.kg import CSRGraph
from kgwise.kg.clean import BuildReport, merge_names
from kgwise.kg.loaders import load_tsv

LINKS = Path(__file__).resolve().parents[1] / "data" / "links"


def _write(tmp_path: Path, triples: str, aliases: str | None = None) -> tuple[Path, Path | None]:
    kg = tmp_path / "kg.tsv"
    kg.write_text(triples, encoding="utf-8")
    if aliases is None:
        return kg, None
    al = tmp_path / "aliases.tsv"
    al.write_text(aliases, encoding="utf-8")
    return kg, al


def test_report_counts_and_names_every_finding(tmp_path: Path) -> None:
    kg, al = _write(tmp_path, "subject\tpredicate\tobject\nParis\tcapital of\tFrance\nbad line\n"
                    "Paris\tcapital of\tFrance\nFrance\tborders\tFrance\nLyon\tin\t\n",
                    "France\tFR\tla France\nParis\tFR\nAtlantis\tlost city\n")
    report = BuildReport()
    g = load_tsv(kg, aliases=al, report=report)
    assert report.counts() == {"header_rows": 1, "broken_lines": 2, "duplicate_triples": 1, "self_loops": 1,
                               "dangling_aliases": 1, "alias_conflicts": 1, "merged_nodes": 0}
    assert report.broken[0].startswith(f"{kg}:3: expected head<TAB>relation<TAB>tail")
    assert report.broken[1].startswith(f"{kg}:6: empty tail")
    assert "'fr' given to 'France' (line 1), 'Paris' (line 2)" in report.alias_conflicts[0]
    assert g.num_edges == 1 and g.aliases(g.node("France")) == ("la France",)
    assert g.aliases(g.node("Paris")) == ()
    text = report.to_text()
    assert "# duplicate triples dropped: 1" in text and f"{kg}:4:" in text and "Atlantis" in text
    # without a report the first broken line stops the load, naming file and line (as before)
    with pytest.raises(DataError, match="got 1 field") as err, pytest.warns(UserWarning, match="header row"):
        load_tsv(kg)
    assert err.value.line == 3
    with pytest.raises(DataError, match="--strict"):
        load_tsv(kg, report=BuildReport(strict=True))
    # a header row is never a triple, even without a report
    with pytest.warns(UserWarning, match="header row"):
        assert load_tsv(_write(tmp_path, "head\trelation\ttail\na\tr\tb\n")[0]).num_edges == 1


def test_merge_names() -> None:
    g = CSRGraph.from_triples(
        [("United States", "borders", "Canada"), ("USA", "member of", "UN"), ("Zürich", "in", "Switzerland"),
         ("Zurich", "home of", "FIFA"), ("germany", "member of", "UN"), ("Germany", "borders", "France"),
         ("Germany", "capital", "Berlin"), ("dollar", "of", "Canada")],
        aliases={"United States": ["USA", "dollar"], "Canada": ["dollar"]})
    report = BuildReport()
    m = merge_names(g, report)
    assert m.num_nodes == g.num_nodes - 3 and m.num_edges == g.num_edges
    assert sorted(report.merged) == sorted([
        "'USA' → 'United States' (label is an alias of)",
        "'Zurich' → 'Zürich' (label differs only in case, accents, hyphens or ae/oe spelling)",
        "'germany' → 'Germany' (label differs only in case, accents, hyphens or ae/oe spelling)"])
    us = m.node("United States")
    assert {m.label(t) for t in m.out_edges(us)[1].tolist()} == {"Canada", "UN"}
    assert "USA" in m.aliases(us) and m.find("zurich") == m.node("Zürich")
    # an alias two nodes share merges nothing ("dollar" stays its own node)
    dollar = m.find("dollar")
    assert dollar is not None and m.label(dollar) == "dollar"
    assert merge_names(m, BuildReport()) is m  # nothing left to merge
    # British spelling merges "Oedema" and "Edema", never a German name's oe with an English word
    spellings = CSRGraph.from_triples(
        [("Oedema", "r", "x"), ("Edema", "r", "y"), ("Noether", "r", "z"), ("nether", "r", "w")])
    joined = merge_names(spellings, BuildReport())
    assert joined.num_nodes == spellings.num_nodes - 1 and joined.find("edema") == joined.find("oedema")
    assert joined.find("noether") != joined.find("nether")


def test_kg_build_reports(tmp_path: Path) -> None:
    out, rep = tmp_path / "geo.npz", tmp_path / "report.txt"
    res = CliRunner().invoke(app, ["kg", "build", str(LINKS / "geography.tsv"), "-f", "tsv", "--aliases",
                                   str(LINKS / "geography_aliases.tsv"), "-o", str(out), "--report",
                                   str(rep)])
    assert res.exit_code == 0, res.output
    assert "1 header rows, 1 duplicate triples, 1 self loops, 1 dangling aliases, 5 merged nodes" in \
        " ".join(res.output.split())
    g = CSRGraph.load(out)
    assert g.num_nodes == 284 and g.find("Ivory Coast") == g.node("Côte d'Ivoire")
    assert "'Czechia' → 'Czech Republic' (label is an alias of)" in rep.read_text(encoding="utf-8")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tr\tb\nbroken\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["kg", "build", str(bad), "-f", "tsv", "-o", str(tmp_path / "b.npz")])
    assert res.exit_code == 0 and f"skipped {bad}:2:" in " ".join(res.output.split()).replace(f"{bad}: 2", "")
    res = CliRunner().invoke(app, ["kg", "build", str(bad), "-f", "tsv", "-o", str(tmp_path / "b.npz"),
                                   "--strict"])
    assert res.exit_code != 0 and "bad.tsv:2" in " ".join(res.output.split())
