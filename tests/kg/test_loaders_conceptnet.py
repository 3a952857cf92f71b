"""ConceptNet loaders: the official assertions CSV (sample written in its format), the real CSQA
choice-triple slice, and KagNet relation merging."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kgwise.errors import DataError
from kgwise.kg import CSRGraph
from kgwise.kg.loaders import (
    concept_label,
    load_conceptnet_csv,
    load_conceptnet_jsonl_triples,
    read_merge_file,
)


def info(dataset: str, weight: float, surface: str | None = None) -> str:
    d: dict[str, object] = {"dataset": dataset, "license": "cc:by/4.0",
                            "sources": [{"contributor": "/s/resource/verbosity"}]}
    if surface:
        d["surfaceText"] = surface
    d["weight"] = weight
    return json.dumps(d)


def row(rel: str, start: str, end: str, meta: str) -> str:
    return f"/a/[{rel}/,{start}/,{end}/]\t{rel}\t{start}\t{end}\t{meta}"


SAMPLE = [
    row("/r/Antonym", "/c/en/able", "/c/en/cane",
        info("/d/verbosity", 0.299, "[[able]] is the opposite of [[cane]]")),
    row("/r/AtLocation", "/c/en/revolving_door/n", "/c/en/bank/n/wn/group", info("/d/conceptnet/4/en", 1.0)),
    row("/r/HasA", "/c/en/bird", "/c/en/wing", info("/d/conceptnet/4/en", 2.0)),
    row("/r/MotivatedByGoal", "/c/en/compete", "/c/en/win", info("/d/conceptnet/4/en", 1.0)),
    row("/r/IsA", "/c/fr/chien/n", "/c/fr/animal", info("/d/wiktionary/fr", 1.0)),
    row("/r/Synonym", "/c/en/dog/n", "/c/fr/chien/n", info("/d/wiktionary/en", 1.0)),
    row("/r/ExternalURL", "/c/en/dog", "http://dbpedia.org/resource/Dog", info("/d/dbpedia/en", 1.0)),
    row("/r/dbpedia/genre", "/c/en/nirvana/n/wp/band", "/c/en/grunge", info("/d/dbpedia/en", 0.5)),
    row("/r/FormOf", "/c/en/dogs/n", "/c/en/dog/n", info("/d/wiktionary/en", 1.0)),
    row("/r/RelatedTo", "/c/en/dog/n", "/c/en/dog", info("/d/wiktionary/en", 1.0)),  # self-loop once stripped
]


def triples(g: CSRGraph) -> set[tuple[str, str, str]]:
    return {(t.head, t.relation, t.tail) for t in g.triples(*g.all_edges())}


@pytest.fixture
def merge_file(data_dir: Path) -> Path:
    return data_dir / "conceptnet" / "merge_relation_kagnet.txt"


def test_concept_label() -> None:
    assert concept_label("/c/en/ice_cream/n/wn/food") == "ice cream"
    assert concept_label("/c/en/able") == "able"
    assert concept_label("/c/fr/chien") is None
    assert concept_label("/c/en/") is None


def test_csv_unmerged(tmp_path: Path) -> None:
    path = tmp_path / "assertions.csv"
    path.write_text("\n".join(SAMPLE) + "\n", encoding="utf-8")
    g = load_conceptnet_csv(path)
    assert triples(g) == {
        ("able", "Antonym", "cane"), ("revolving door", "AtLocation", "bank"), ("bird", "HasA", "wing"),
        ("compete", "MotivatedByGoal", "win"), ("nirvana", "dbpedia/genre", "grunge"),
        ("dogs", "FormOf", "dog"),
    }


def test_csv_kagnet_merged_and_gzipped(tmp_path: Path, merge_file: Path) -> None:
    path = tmp_path / "assertions.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(SAMPLE) + "\n")
    g = load_conceptnet_csv(path, merge_file)
    # HasA and MotivatedByGoal are reversed members; dbpedia/genre and FormOf are in no group
    assert triples(g) == {
        ("able", "antonym", "cane"), ("revolving door", "atlocation", "bank"), ("wing", "partof", "bird"),
        ("win", "causes", "compete"),
    }


@pytest.mark.parametrize(
    "bad",
    [
        "/a/[/r/IsA/,/c/en/a/,/c/en/b/]\t/r/IsA\t/c/en/a\t/c/en/b",  # 4 fields
        "/a/[/r/IsA/,/c/en/a/,/c/en/b/]\tIsA\t/c/en/a\t/c/en/b\t{}",  # relation not /r/
        "/a/[/r/IsA/,/c/en/a/,/c/en/b/]\t/r/IsA\ten/a\t/c/en/b\t{}",  # start not a concept
        "/a/[/r/IsA/,/c/en/a/,/c/en/b/]\t/r/IsA\t/c/en/a\t/c/en/b\tweight=1",  # info not JSON object
        "/a/[/r/IsA/,/c/en//,/c/en/b/]\t/r/IsA\t/c/en/\t/c/en/b\t{}",  # empty term
    ],
)
def test_csv_malformed_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "assertions.csv"
    path.write_text(SAMPLE[0] + "\n" + SAMPLE[1] + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_conceptnet_csv(path)
    assert err.value.path == str(path) and err.value.line == 3


def test_merge_file(merge_file: Path, tmp_path: Path) -> None:
    merge = read_merge_file(merge_file)
    assert len({g for g, _ in merge.values()}) == 17
    assert merge["hasa"] == ("partof", True) and merge["motivatedbygoal"] == ("causes", True)
    assert merge["synonym"] == ("relatedto", False) and merge["isa"] == ("isa", False)
    bad = tmp_path / "merge.txt"
    bad.write_text("isa/instanceof\npartof//hasa\n")
    with pytest.raises(DataError) as err:
        read_merge_file(bad)
    assert err.value.line == 2
    bad.write_text("isa\nisa/definedas\n")
    with pytest.raises(DataError, match="two groups"):
        read_merge_file(bad)


def test_real_slice(data_dir: Path, merge_file: Path) -> None:
    root = data_dir / "conceptnet" / "csqa_choice_triples_jessionlin"
    raw = load_conceptnet_jsonl_triples(root)
    # every distinct (head, relation, tail) of the 1,221 dev + 1,140 test questions, counted independently
    expected: set[tuple[str, str, str]] = set()
    for name in ("dev_data.json", "test_data.json"):
        for q in json.loads((root / name).read_text()):
            for c in q["question"]["choices"]:
                expected.update((h, r, t) for h, r, t in c["triple"] if h != t)
    assert triples(raw) == expected
    assert (raw.num_nodes, raw.num_edges, raw.num_relations) == (5_631, 7_531, 10)
    assert ("revolving door", "AtLocation", "bank") in triples(raw)
    merged = load_conceptnet_jsonl_triples(root, merge_file)
    assert merged.num_relations == 8 and merged.num_edges == 7_530
    assert ("revolving door", "atlocation", "bank") in triples(merged)
    both = load_conceptnet_jsonl_triples([root / "dev_data.json"])
    assert both.num_edges < raw.num_edges


def test_slice_malformed(tmp_path: Path) -> None:
    ok = {"id": "q1", "question": {"choices": [{"label": "A", "triple": [["a", "IsA", "b"]]}]}}
    bad = {"id": "q2", "question": {"choices": [{"label": "A", "triple": [["a", "IsA"]]}]}}
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match="q2") as err:
        load_conceptnet_jsonl_triples(jsonl)
    assert err.value.path == str(jsonl) and err.value.line == 2
    array = tmp_path / "s.json"
    array.write_text("[\n" + json.dumps(ok) + ",\n" + json.dumps(bad) + "\n]\n")
    with pytest.raises(DataError, match="q2") as err:
        load_conceptnet_jsonl_triples(array)
    assert err.value.line == 3
    array.write_text("[\n" + json.dumps(ok) + ",\n{oops}\n]\n")
    with pytest.raises(DataError, match="invalid JSON") as err:
        load_conceptnet_jsonl_triples(array)
    assert err.value.line == 3
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.json"):
        load_conceptnet_jsonl_triples(tmp_path / "empty")
