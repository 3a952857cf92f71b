"""``Pipeline.warm``: what ``kgwise serve`` loads before it listens, so its first answers do not wait."""

from __future__ import annotations

from pathlib import Path

import pytest

import kgwise.eval.recorded  # noqa: F401  (registers the recorded answers the arms replay)
from kgwise.app import Pipeline
from kgwise.embed import MiniLM
from kgwise.kg import CSRGraph


@pytest.mark.parametrize("arms", [1, 2])
def test_warm_loads_the_question_encoder_only_when_there_is_an_arm_to_route_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arms: int) -> None:
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path / "cache"))
    CSRGraph.from_triples([("barack obama", "born in", "honolulu")]).save(tmp_path / "kg.npz")
    specs = [("chatgpt", "replay:chatgpt"), ("davinci-003", "replay:text-davinci-003")][:arms]
    (tmp_path / "kgwise.toml").write_text('[kg]\ngraph = "kg.npz"\n' + "".join(
        f'\n[[arms]]\nname = "{name}"\nkind = "llm"\nspec = "{spec}"\ncluster = "LLM"\nprice = 0\n'
        for name, spec in specs) + "\n[router]\nbudget_calls = 10\n", encoding="utf-8")
    with Pipeline.from_config(tmp_path / "kgwise.toml", tmp_path / "state") as pipe:
        assert isinstance(pipe.encoder, MiniLM) and pipe.encoder._model is None  # loaded on first use
        pipe.warm()
        assert (pipe.encoder._model is not None) == (arms > 1)  # one arm: no question is embedded
        r = pipe.answer("what did james k polk do before he was president?")  # a recorded WebQSP question
        assert r.arm in dict(specs) and r.answer
