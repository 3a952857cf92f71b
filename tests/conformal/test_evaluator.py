"""Eq. 6 evaluator: answer items, min-over-items scores, Table 5 prompt, generators."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kgwise.conformal.evaluator import (
    EvaluatorConfig,
    LLMGenerator,
    RecordedGenerations,
    UQEvaluator,
    answer_items,
    render_path,
)
from kgwise.conformal.retriever import UQRetriever
from kgwise.conformal.scores import S1, verbalise_relation
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError
from kgwise.kg import CSRGraph


def test_answer_items() -> None:
    assert answer_items("Jamaican English\nJamaican Creole English Language\n") == [
        "Jamaican English", "Jamaican Creole English Language"]
    assert answer_items("- a\n* b\n\n a \n") == ["a", "b"]
    assert answer_items("") == []


def test_scores_are_min_over_items_and_exact_match_is_zero(encoder: Encoder) -> None:
    ev = UQEvaluator(S1(encoder), config=EvaluatorConfig(granularity="items"))
    s = ev.scores(["Paris", "Lyon", "Nice"], "Lyon\nParis")
    assert s[0] == pytest.approx(0, abs=1e-6) and s[1] == pytest.approx(0, abs=1e-6)
    assert s[2] > 1e-3
    assert np.isinf(ev.scores(["Paris"], "")).all()
    assert sorted(UQEvaluator.select(["Paris", "Lyon", "Nice"], s, 1e-5)) == ["Lyon", "Paris"]
    assert UQEvaluator.select(["a", "b"], [0.5, 0.1], 1.0) == ["b", "a"]


def test_whole_generation_score(encoder: Encoder) -> None:
    ev = UQEvaluator(S1(encoder))  # default: Eq. 6 against the whole generated text
    s = ev.scores(["Paris", "Lyon"], "Lyon\nParis")
    assert (s > 1e-3).all()
    assert ev.scores(["Lyon"], " Lyon \n")[0] == pytest.approx(0, abs=1e-6)
    with pytest.raises(ConfigError):
        EvaluatorConfig(granularity="tokens")  # type: ignore[arg-type]


def test_prompt_and_paths(encoder: Encoder) -> None:
    kg = CSRGraph.from_triples([("Indonesia", "location.religion_percentage", "Hinduism"),
                                ("Hinduism", "religion.practiced_in", "Bali")])
    ev = UQEvaluator(S1(encoder))
    paths = UQRetriever(kg, S1(encoder)).paths("What religions are practiced in Indonesia?",
                                                     [kg.node("Indonesia")])
    lines = ev.prompt_paths(kg, paths)
    assert "Indonesia -> location.religion_percentage -> Hinduism" in lines
    assert "Indonesia -> location.religion_percentage -> Hinduism -> religion.practiced_in -> Bali" in lines
    prompt = ev.prompt("What religions are practiced in Indonesia?", lines[:1])
    assert prompt.startswith("Based on the following reasoning paths: Indonesia -> ")
    assert prompt.endswith(", What religions are practiced in Indonesia?")
    back = "Hinduism -> location.religion_percentage (inverse) -> Indonesia"
    assert render_path(kg, [1, 0], [(0, True)]) == back
    words = "inverse of people person place of birth"
    assert verbalise_relation("people.person.place_of_birth", True) == words


def test_generators(encoder: Encoder) -> None:
    rec = RecordedGenerations({"q1": "Hinduism"})
    assert UQEvaluator(S1(encoder), rec).generate("q1", "q?", ["p"]) == "Hinduism"
    with pytest.raises(DataError):
        rec.generate("q2", "")
    with pytest.raises(ConfigError):
        UQEvaluator(S1(encoder)).generate("q1", "q?", [])

    class EchoLLM:
        """Test double for a kgwise.llm.LLM: answers with the prompt's last word."""

        name = "echo"

        def generate(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                     stop: object = None) -> object:
            class G:
                text = prompt.split()[-1].rstrip("?")

            return G()

    gen = LLMGenerator(EchoLLM(), max_tokens=8)
    assert UQEvaluator(S1(encoder), gen).generate("q", "Where is Bali", ["x -> r -> Bali"]) == "Bali"
    with pytest.raises(ConfigError):
        LLMGenerator(object())
    assert math.isinf(UQEvaluator(S1(encoder)).scores(["a"], "\n\n")[0])


def test_both_granularities_score_the_min_of_items_and_whole(encoder: Encoder) -> None:
    gen, cands = "Lyon\nParis", ["Paris", "Nice"]
    both = UQEvaluator(S1(encoder), config=EvaluatorConfig(granularity="both")).scores(cands, gen)
    items = UQEvaluator(S1(encoder), config=EvaluatorConfig(granularity="items")).scores(cands, gen)
    whole = UQEvaluator(S1(encoder)).scores(cands, gen)
    np.testing.assert_allclose(both, np.minimum(items, whole), atol=1e-6)


def test_scores_do_not_depend_on_the_candidates_order(data_dir: Path) -> None:
    """Eq. 6 scores of real MiniLM embeddings are bit-identical whatever the order of the candidates (the
    order follows node ids, which differ between two stores of the same KG): a float32 product's last bit
    depends on where a row sits in the BLAS blocks."""
    from kgwise.embed import MiniLM
    from kgwise.kg.loaders import load_tsv

    kg = load_tsv(data_dir / "webqsp" / "freebase_fragment.tsv")
    names = [kg.label(v) for v in range(0, kg.num_nodes, 25)]  # ~1,000 real candidate names
    generation = "Jamaican English\nJamaican Creole English Language"
    rng = np.random.default_rng(0)
    for granularity in ("whole", "items"):  # one column (a matrix-vector product), two columns
        ev = UQEvaluator(S1(MiniLM()), config=EvaluatorConfig(granularity=granularity))
        for n in (3, 5, 8, 13, len(names)):  # small products take other BLAS kernels than large ones
            labels = names[:n]
            base = ev.scores(labels, generation)
            for _ in range(3):
                perm = rng.permutation(n)
                assert np.array_equal(ev.scores([labels[i] for i in perm], generation), base[perm]), (n,
                                                                                                     granularity)
