"""The shipped local models' table: one entry per short name, its scoring rule and cost, and what
`kgwise init` writes from it."""

from __future__ import annotations

import tomllib

from kgwise.app.config import starter_toml
from kgwise.llm.base import SCORING_RULES
from kgwise.llm.llamacpp import SHORT_NAMES
from kgwise.llm.local_models import LOCAL_MODELS, ladder_comment


def test_every_short_name_has_a_rule_a_cost_and_a_locator() -> None:
    assert set(SHORT_NAMES) == set(LOCAL_MODELS) == {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b",
                                                      "qwen2.5-coder-1.5b"}
    for m in LOCAL_MODELS.values():
        assert m.scoring in SCORING_RULES and m.seconds_per_question > 0
        assert (m.template == "chatml") == (m.split is not None)
    for m in (LOCAL_MODELS["qwen2.5-coder-0.5b"], LOCAL_MODELS["qwen2.5-coder-1.5b"]):
        assert m.split is not None
        assert sum(p.size_bytes for p in m.split.parts) == m.split.size_bytes
        assert [p.index for p in m.split.parts] == list(range(1, len(m.split.parts) + 1))


def test_ladder_runs_cheapest_first_from_the_free_kg_model() -> None:
    line = ladder_comment()[-1]
    assert line.startswith('#   KG model (kind = "kgm") free → ')
    positions = [line.index(name) for name in sorted(LOCAL_MODELS,
                                                     key=lambda n: LOCAL_MODELS[n].seconds_per_question)]
    assert positions == sorted(positions)


def test_init_writes_each_local_models_scoring_with_its_alternatives() -> None:
    text = starter_toml("g.npz", [("kgm", "kgm", "m.pt", None), ("q", "inject", "qwen2.5-coder-1.5b", None),
                                  ("api", "llm", "openai:gpt-4o-mini", None)], budget_calls=100)
    arms = tomllib.loads(text)["arms"]
    rule = LOCAL_MODELS["qwen2.5-coder-1.5b"].scoring
    assert arms[1]["scoring"] == rule and "scoring" not in arms[2] and "scoring" not in arms[0]
    others = ", ".join(r for r in SCORING_RULES if r != rule)
    assert f'scoring = "{rule}"  # measured best for qwen2.5-coder-1.5b on dev questions; or {others}' in text
    assert f"# price = {LOCAL_MODELS['qwen2.5-coder-1.5b'].seconds_per_question!r}  # its seconds" in text
    assert ladder_comment()[-1] in text
