"""Built graphs are cached while their sources and the graph-building code stay the same."""

from __future__ import annotations

import os
import time
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


def test_only_the_most_recently_used_entries_of_a_graph_are_kept(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "g.tsv"
    other = tmp_path / "h.tsv"
    other.write_text("a\tr\tb\n", encoding="utf-8")
    cached_graph("other-kg", [other], lambda: load_tsv(other))
    keys = []
    past = time.time_ns() - 100 * 10**9  # entries used in order, before the one being built
    for n in range(1, 5):
        source.write_text("".join(f"x{i}\tr\ty{i}\n" for i in range(n)), encoding="utf-8")
        os.utime(source, ns=(0, n * 10**18))
        keys.append(graph_key([source]))
        assert cached_graph("test-kg", [source], lambda: load_tsv(source)).num_edges == n
        os.utime(tmp_path / "cache" / f"test-kg-{keys[-1]}.npz", ns=(past + n, past + n))
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert names == sorted([f"other-kg-{graph_key([other])}.npz"] + [f"test-kg-{k}.npz" for k in keys[-2:]])
    for n in (3, 5):  # reusing the entry of 3 edges makes it the most recent: 4's goes when 5's comes
        source.write_text("".join(f"x{i}\tr\ty{i}\n" for i in range(n)), encoding="utf-8")
        os.utime(source, ns=(0, n * 10**18))
        assert cached_graph("test-kg", [source], lambda: load_tsv(source)).num_edges == n
    kept = sorted(p.name for p in (tmp_path / "cache").glob("test-kg-*"))
    assert kept == sorted([f"test-kg-{keys[2]}.npz", f"test-kg-{graph_key([source])}.npz"])
