"""A single KnowGPT tool is a pipeline of one ``inject`` arm: with the real DDB graph and the real local
model (SmolLM2-135M), its answer, its evidence and its knowledge are the same from the Python object, the
shell (``kgwise ask --config``) and the HTTP service (chat completions, ``/v1/evidence``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kgwise.app import Pipeline
from kgwise.errors import ConfigError
from kgwise.kg.loaders import load_ddb

QUESTION = "Which drug is used to treat hypertensive disease?"  # DDB's name of the concept
CHOICES = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]
OTHER = ("Which drug treats type 2 diabetes?", ["Metformin", "Warfarin"])
CONFIG = """\
[kg]
graph = "ddb.npz"

[[arms]]
name = "knowgpt"
kind = "inject"
spec = "smollm2-135m"
combo = "P_sub+F_t"
price = 0

[router]
budget_calls = 1000
"""


@pytest.fixture(scope="module")
def config(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-arm")
    load_ddb(data_dir / "ddb").save(root / "ddb.npz")
    (root / "kgwise.toml").write_text(CONFIG, encoding="utf-8")
    return root / "kgwise.toml"


@pytest.fixture(scope="module")
def pipe(config: Path) -> Iterator[Pipeline]:
    with Pipeline.from_config(config, config.parent / "state") as p:
        yield p


@pytest.mark.slow
def test_the_arm_answers_with_its_combination_and_the_evidence_it_read(pipe: Pipeline) -> None:
    r = pipe.answer(QUESTION, CHOICES)
    assert r.arm == "knowgpt" and r.label is not None and r.label in "ABCD"
    assert r.answer == CHOICES["ABCD".index(r.label)]
    assert sum(r.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
    assert r.knowledge.combo == "P_sub+F_t" and r.knowledge.text and r.usage.calls + r.usage.cached_calls >= 1
    assert r.answer_set is None and any("no calibration" in n for n in r.notes)  # sets come from a fit
    ev = pipe.evidence(QUESTION, CHOICES)
    assert ev.triples == r.knowledge.triples  # what the arm read is what /v1/evidence shows
    assert ev.question_concepts == r.question_entities and ev.choice_concepts == r.choice_entities
    assert "Lisinopril" in [c for cs in ev.choice_concepts for c in cs]
    assert all(p.nodes[0] in ev.question_concepts for p in ev.paths)
    # each question grounds its own concepts
    other = pipe.evidence(*OTHER)
    flat = {x for t in other.triples for x in (t.head, t.tail)}
    assert "Warfarin" in flat and "Lisinopril" not in flat
    with pytest.raises(ConfigError, match="empty"):
        pipe.evidence("  ", CHOICES)


@pytest.mark.slow
def test_the_answer_s_knowledge_is_ranked_and_its_support_ends_at_the_answer(pipe: Pipeline) -> None:
    r = pipe.answer(QUESTION, CHOICES)
    ev = pipe.evidence(QUESTION, CHOICES)
    # the arm lists the ranked question→choice paths that /v1/evidence lists, in the same order
    assert len(r.knowledge.paths) == len(ev.paths) > 0
    assert [{x for t in chain for x in (t.head, t.tail)} for chain in r.knowledge.paths] == \
        [set(p.nodes) for p in ev.paths]
    assert all(p.nodes[0] in ev.question_concepts for p in ev.paths)
    assert r.label is not None
    chosen = set(r.choice_entities["ABCD".index(r.label)])
    for chain in r.knowledge.support:
        assert chain in r.knowledge.paths
        assert {chain[-1].head, chain[-1].tail} & chosen  # it ends at a concept of the chosen answer
    # the prompt read the ranked paths within the default budget of 48 tokens: a few facts, not P_sub's 8
    facts = [x for x in r.knowledge.text.splitlines() if x]
    assert 0 < len(facts) < 8 and len(r.knowledge.text) <= 48 * 4 + 8 * len(facts)
    # the support is what the prompt said of the chosen answer: a fact naming it, or nothing
    assert bool(r.knowledge.support) == any(f"{c}," in r.knowledge.text or f", {c})" in r.knowledge.text
                                            for c in chosen)
    assert "(Lisinopril, may treat, Hypertensive disease)" in facts  # the best path: one direct fact


@pytest.mark.slow
def test_the_shell_and_the_service_give_the_pipeline_s_answer(pipe: Pipeline, config: Path, tmp_path: Path
                                                              ) -> None:
    from kgwise.cli.main import app as cli
    from kgwise.server import ServerSettings, create_app
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    expected = pipe.answer(QUESTION, CHOICES)
    res = CliRunner().invoke(cli, ["ask", QUESTION, "--choices", "|".join(CHOICES), "--config", str(config),
                                   "--state", str(tmp_path / "state"), "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    shell = json.loads((tmp_path / "a.json").read_text())
    assert shell["label"] == expected.label and shell["knowledge"]["combo"] == "P_sub+F_t"
    assert shell["probabilities"] == pytest.approx(expected.probabilities, abs=1e-6)

    app = create_app(ServerSettings(), pipeline_hub({"kgwise": ServedPipeline(pipe)}))
    with TestClient(app) as client:
        assert client.get("/health").json()["pipelines"] == ["kgwise"]
        chat = client.post("/v1/chat/completions", json={
            "model": "kgwise", "messages": [{"role": "user", "content": QUESTION}],
            "kgwise": {"choices": CHOICES}})
        assert chat.status_code == 200, chat.text
        extra = chat.json()["kgwise"]
        assert extra["choice"] == expected.label and extra["arm"] == "knowgpt"
        body = client.post("/v1/evidence", json={"question": QUESTION, "choices": CHOICES})
        assert body.status_code == 200, body.text
        served = body.json()
        assert served["triples"] == extra["evidence"]["triples"]
        assert served["triples"] == [{"head": t.head, "relation": t.relation, "tail": t.tail}
                                     for t in expected.knowledge.triples]
        assert served["choice_concepts"] == [list(c) for c in expected.choice_entities]
        # bad input: 4xx naming what is wrong
        one = client.post("/v1/evidence", json={"question": QUESTION, "choices": ["only"]})
        assert one.status_code == 422 and "choices" in one.text
        empty = client.post("/v1/evidence", json={"question": "", "choices": CHOICES})
        assert empty.status_code == 422 and "question" in empty.text
        unknown = client.post("/v1/evidence", json={"question": QUESTION, "model": "nope"})
        assert unknown.status_code == 404 and "nope" in unknown.text
        same = client.post("/v1/evidence", json={"question": "dog?", "choices": ["a", "A "]})
        assert same.status_code == 422 and "choice" in same.text
