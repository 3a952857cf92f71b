"""The KG-links baseline: link counts per choice, ties scored as their expectation, on a toy graph and on
CSQA's real ConceptNet slice."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.eval.links import link_baseline, link_counts
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder
from kgwise.kg.loaders import load_conceptnet_jsonl_triples
from kgwise.types import make_question


@pytest.fixture(scope="module")
def toy() -> tuple[CSRGraph, Grounder]:
    kg = CSRGraph.from_triples([("revolving door", "atlocation", "bank"), ("bank", "relatedto", "security"),
                                ("revolving door", "atlocation", "mall"), ("vault", "atlocation", "bank"),
                                ("library", "relatedto", "book")])
    return kg, Grounder(kg)


def test_counts_edges_in_both_directions(toy: tuple[CSRGraph, Grounder]) -> None:
    kg, grounder = toy
    q = make_question("A revolving door is a security measure at a what?", ["bank", "library", "mall"])
    assert link_counts(kg, grounder.ground(q)).tolist() == [2, 0, 1]  # door→bank, bank→security; door→mall


def test_ties_are_scored_as_their_expectation(toy: tuple[CSRGraph, Grounder]) -> None:
    kg, grounder = toy
    alone = make_question("Where is a security door?", ["bank", "library", "mall"], qid="a")
    tied = make_question("Where is a revolving door?", ["mall", "bank", "library"], qid="b")
    unlinked = make_question("Where is a cat?", ["bank", "library", "mall"], qid="c")
    gold = {"a": "A", "b": "B", "c": "B"}
    qs = [replace(q, gold=(gold[q.id],)) for q in (alone, tied, unlinked)]
    report = link_baseline(kg, grounder, qs)
    assert report["n"] == 3
    assert report["accuracy"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert report["gold_alone_most_linked"] == pytest.approx(1 / 3)
    assert report["no_choice_linked"] == pytest.approx(1 / 3)
    assert report["all_choices_linked"] == 0 and report["chance"] == pytest.approx(1 / 3)


def test_questions_without_a_gold_choice_are_left_out(toy: tuple[CSRGraph, Grounder]) -> None:
    kg, grounder = toy
    assert link_baseline(kg, grounder, [make_question("Where is a door?", ["bank", "mall"])]) == {"n": 0}


def test_real_slice_links_the_revolving_door_to_four_choices(data_dir: Path) -> None:
    root = data_dir / "conceptnet"
    kg = load_conceptnet_jsonl_triples(root / "csqa_choice_triples_jessionlin",
                                       root / "merge_relation_kagnet.txt")
    q = next(q for q in load("csqa", "ihdev", data_dir) if q.text.startswith("A revolving door"))
    counts = link_counts(kg, Grounder(kg).ground(q))
    linked = {c.text for c, n in zip(q.choices, counts, strict=True) if n > 0}
    assert linked == {"bank", "department store", "mall", "new york"}  # not 'library'
    report = link_baseline(kg, Grounder(kg), load("csqa", "ihdev", data_dir)[:200])
    assert report["n"] == 200 and 0 < report["accuracy"] < 1 and report["chance"] == pytest.approx(0.2)
