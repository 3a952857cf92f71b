"""Built graphs are cached while their sources and the graph-building code stay the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgwise.kg import CSRGraph
from kgwise.kg.cache import cached_graph, graph_key
from kgwise.kg.loaders import load_tsv


def test_a_changed_source_builds_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "g.tsv"
    source.write_text("aspirin\tmay treat\tpain\n", encoding="utf-8")
    builds: list[int] = []

    def build() -> CSRGraph:
        builds.append(1)
        return load_tsv(source)

    first = cached_graph("test-kg", [source], build)
    again = cached_graph("test-kg", [source], build)
    assert len(builds) == 1 and again.num_edges == first.num_edges == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f"test-kg-{graph_key([source])}.npz"]
    source.write_text("aspirin\tmay treat\tpain\nwarfarin\tinteracts with\taspirin\n", encoding="utf-8")
    os.utime(source, ns=(0, 10**18))  # a later mtime even on coarse clocks
    assert cached_graph("test-kg", [source], build).num_edges == 2
    assert len(builds) == 2
    assert cached_graph("test-kg", [source], build, use_cache=False).num_edges == 2
    assert len(builds) == 3
