"""kgwise.app.arms: the arms' cost bounds (real smollm2 and MiniLM behind an inject arm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.app.pipeline import Pipeline
from kgwise.types import make_question

from .conftest import write_config, write_kg

INJECT = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "kg"
kind = "inject"
spec = "smollm2-135m"
{extra}
[router]
budget_calls = 10
"""


@pytest.mark.slow
@pytest.mark.parametrize(("extra", "calls"), [
    ("", 2),  # the default combination, P_sub+F_s; smollm2 scores by PMI (its measured rule): 2 calls
    ('combo = "P_sub+F_t"\n', 2),
    ('combo = "P_sub+F_g"\n', 3),  # F_g has the LLM describe the graph first
    ('combos = ["P_sub+F_t", "P_sub+F_g"]\n', 3),  # a fit answers with each
])
def test_an_inject_arm_bounds_one_more_call_only_where_it_may_describe_the_graph(
        tmp_path: Path, extra: str, calls: int) -> None:
    write_kg(tmp_path)
    with Pipeline.from_config(write_config(tmp_path, INJECT.format(extra=extra))) as pipe:
        q = make_question("What does aspirin treat?", ["fever", "diabetes"])
        assert pipe.runners["kg"].usage_bound(q).calls == calls
        assert pipe.bounds(q) == {"kg": float(calls)}


@pytest.mark.slow
def test_an_inject_arm_s_support_is_what_its_prompt_said_of_its_answer(tmp_path: Path) -> None:
    """Real smollm2 over the drug/disease graph: a multiple-choice answer's support is the prompt's paths
    to the chosen choice; an open answer's, the prompt's paths to a node its text names."""
    from kgwise.types import Question, Triple

    write_kg(tmp_path)
    body = INJECT.format(extra='combo = "P_sub+F_t"\n')
    with Pipeline.from_config(write_config(tmp_path, body)) as pipe:
        arm = pipe.runners["kg"]
        mc = arm.answer(make_question("What does metformin treat?", ["diabetes", "swelling"]))
        direct = (Triple("metformin", "treats", "diabetes"),)
        assert mc.knowledge.paths[0] == direct and "(metformin, treats, diabetes)" in mc.knowledge.text
        assert mc.knowledge.support == ((direct,) if mc.prediction == "A" else ())
        free = arm.answer(Question("o1", "What does metformin treat?", ()))
        assert free.knowledge.paths and free.knowledge.text
        said = free.prediction.casefold()
        for chain in free.knowledge.support:
            assert chain in free.knowledge.paths
            assert chain[-1].tail.casefold() in said or chain[-1].head.casefold() in said
