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
    ("", 1),  # the default combination, P_sub+F_s
    ('combo = "P_sub+F_t"\n', 1),
    ('combo = "P_sub+F_g"\n', 2),  # F_g has the LLM describe the graph first
    ('combos = ["P_sub+F_t", "P_sub+F_g"]\n', 2),  # a fit answers with each
])
def test_an_inject_arm_bounds_one_more_call_only_where_it_may_describe_the_graph(
        tmp_path: Path, extra: str, calls: int) -> None:
    write_kg(tmp_path)
    with Pipeline.from_config(write_config(tmp_path, INJECT.format(extra=extra))) as pipe:
        q = make_question("What does aspirin treat?", ["fever", "diabetes"])
        assert pipe.runners["kg"].usage_bound(q).calls == calls
        assert pipe.bounds(q) == {"kg": float(calls)}
