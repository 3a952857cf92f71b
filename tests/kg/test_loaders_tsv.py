"""TSV triple loader: the real Freebase fragment and malformed lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import DataError
from kgwise.kg.loaders import load_tsv


def test_real_freebase_fragment(data_dir: Path) -> None:
    path = data_dir / "webqsp" / "freebase_fragment.tsv"
    g = load_tsv(path)
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]
    assert g.num_edges == len({tuple(r) for r in rows}) == 46_040
    assert g.num_nodes == len({r[0] for r in rows} | {r[2] for r in rows})
    assert g.num_relations == len({r[1] for r in rows})
    # names starting with '#' are data, not comments
    head = g.node("#thatPOWER")
    rel = g.relation_id("music.album.artist")
    assert g.node("Will i Am") in g.out_edges(head)[1][g.out_edges(head)[0] == rel].tolist()


@pytest.mark.parametrize("bad, message", [("a\tb", r"got 2 field\(s\)"), ("a\tb\tc\td", r"got 4 field\(s\)"),
                                          ("a\t\tc", "empty relation"), (" \tb\t ", "empty head and tail")])
def test_malformed_line(tmp_path: Path, bad: str, message: str) -> None:
    path = tmp_path / "t.tsv"
    path.write_text(f"x\tr\ty\n\n{bad}\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        load_tsv(path)
    assert err.value.path == str(path) and err.value.line == 3
    with pytest.raises(DataError, match="a directory, not a file"):
        load_tsv(tmp_path)


def test_small(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_text("x\tr\ty\ny\tr\tx\nx\tr\ty\n", encoding="utf-8")
    g = load_tsv(path)
    assert (g.num_nodes, g.num_edges, g.num_relations, g.name) == (2, 2, 1, "t")
    with pytest.raises(DataError, match="not found"):
        load_tsv(tmp_path / "missing.tsv")
