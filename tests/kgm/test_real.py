"""The KG model on real CSQA questions grounded in WordNet + the ConceptNet slice, embedded by MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.datasets import load
from kgwise.embed import MiniLM
from kgwise.kg.benchmarks import DATASET_KGS, build_kg
from kgwise.kg.csr import CSRGraph
from kgwise.kgm.cache import GraphBuilder
from kgwise.kgm.features import FeatureConfig, NodeTable, QuestionGraph, collate
from kgwise.kgm.io import save_model
from kgwise.kgm.model import GraphQA, ModelConfig
from kgwise.kgm.predictor import KGMPredictor
from kgwise.kgm.train import TrainConfig, predict_proba, train_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kg(data_dir: Path) -> CSRGraph:
    return build_kg(DATASET_KGS["csqa"], data_dir)


@pytest.fixture(scope="module")
def sample(kg: CSRGraph, data_dir: Path) -> tuple[list[QuestionGraph], NodeTable, GraphBuilder]:
    builder = GraphBuilder(kg, MiniLM(), FeatureConfig(max_nodes=40), wordnet_dir=data_dir / "wordnet")
    questions = load("csqa", "ihtrain", data_dir)[:24]
    graphs = [builder.build(q) for q in questions]
    return graphs, builder.node_table(graphs), builder


def _loss(model: GraphQA, graphs: list[QuestionGraph], table: NodeTable, R: int) -> float:
    model.eval()
    with torch.no_grad():
        b = collate(graphs, table, R)
        return float(torch.nn.functional.cross_entropy(model(b), b.labels))


def test_real_subgraphs_are_grounded(sample: tuple[list[QuestionGraph], NodeTable, GraphBuilder]) -> None:
    graphs, table, _ = sample
    assert all(g.num_choices == 5 and 0 <= g.label < 5 for g in graphs)
    assert np.mean([g.question_mask.any() for g in graphs]) > 0.9
    assert np.mean([g.choice_mask[c].any() for g in graphs for c in range(5)]) > 0.8
    assert np.mean([len(g.edges) > 0 for g in graphs]) > 0.9
    assert table.emb.shape[1] == 384


def test_forward_backward_on_real_batch(
    kg: CSRGraph, sample: tuple[list[QuestionGraph], NodeTable, GraphBuilder]
) -> None:
    graphs, table, _ = sample
    torch.manual_seed(0)
    model = GraphQA(ModelConfig(num_relations=kg.num_relations))
    b = collate(graphs[:8], table, kg.num_relations)
    assert b.num_graph_nodes > 0 and len(b.edge_src) > 0
    loss = torch.nn.functional.cross_entropy(model(b), b.labels)
    loss.backward()
    assert torch.isfinite(loss)
    for name in ("node_in.weight", "layers.0.msg.weight", "layers.1.key.weight", "pool_key.weight"):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name


def test_loss_decreases_on_real_sample(
    kg: CSRGraph, sample: tuple[list[QuestionGraph], NodeTable, GraphBuilder]
) -> None:
    graphs, table, _ = sample
    torch.manual_seed(0)
    R = kg.num_relations
    model = GraphQA(ModelConfig(num_relations=R, dropout=0.0))
    before = _loss(model, graphs, table, R)
    result = train_model(
        model,
        (graphs, table),
        (graphs, table),
        TrainConfig(epochs=25, batch_size=8, lr=3e-3, patience=25),
        log=lambda _: None,
        progress=False,
    )
    losses = [h["train_loss"] for h in result.history]
    assert abs(losses[0] - before) < 0.1  # starts near log(5): nothing known before training
    assert losses[-1] < 0.3 * losses[0], losses
    assert result.best_dev_accuracy > 0.9 and len(losses) == 25


def test_saved_model_predicts_identically(
    tmp_path: Path, kg: CSRGraph, data_dir: Path, sample: tuple[list[QuestionGraph], NodeTable, GraphBuilder]
) -> None:
    graphs, table, _ = sample
    torch.manual_seed(1)
    model = GraphQA(ModelConfig(num_relations=kg.num_relations)).eval()
    path = tmp_path / "m.pt"
    save_model(
        path,
        model,
        {
            "kg": DATASET_KGS["csqa"].to_dict(),
            "kg_relations": list(kg.relations),
            "feature": {"max_nodes": 40, "max_text_chars": 100},
            "subgraph": {"max_nodes": 40},
        },
    )
    predictor = KGMPredictor.load(path, data_dir, kg=kg)
    questions = load("csqa", "ihtrain", data_dir)[:6]
    direct = predict_proba(model, graphs[:6], table)
    for q, p in zip(questions, direct, strict=True):
        np.testing.assert_allclose(predictor.predict(q), p, rtol=1e-5, atol=1e-6)
        assert abs(predictor.predict(q).sum() - 1) < 1e-9
    ans = predictor.answer(questions[0])
    assert ans.prediction == "ABCDE"[int(np.argmax(direct[0]))] and ans.usage.calls == 1


def test_cli_train_and_eval(tmp_path: Path, data_dir: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "kgm.pt"
    res = runner.invoke(
        app,
        [
            "kg",
            "model",
            "train",
            "--dataset",
            "csqa",
            "--kind",
            "text",
            "--limit",
            "16",
            "--reserve",
            "4:8",
            "--epochs",
            "2",
            "--out",
            str(out),
            "--data",
            str(data_dir),
            "--json",
            str(tmp_path / "train.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "train.json").read_text())
    assert report["kind"] == "text" and report["train_questions"] == 12 and out.is_file()
    assert report["train_spans"] == [[0, 4], [8, 16]]
    res = runner.invoke(
        app,
        [
            "eval",
            "kgm",
            "--dataset",
            "csqa",
            "--split",
            "ihdev",
            "--model",
            str(out),
            "--limit",
            "16",
            "--data",
            str(data_dir),
            "--json",
            str(tmp_path / "eval.json"),
            "--predictions",
            str(tmp_path / "pred"),
        ],
    )
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "eval.json").read_text())
    assert ev["ihdev"]["questions"] == 16 and 0.0 <= ev["ihdev"]["accuracy"] <= 1.0
    rows = [json.loads(x) for x in (tmp_path / "pred" / "ihdev.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and all(abs(sum(r["probabilities"]) - 1) < 1e-4 for r in rows)
    assert np.mean([r["correct"] for r in rows]) == ev["ihdev"]["accuracy"]
    q = load("csqa", "ihdev", data_dir)[0]  # one question through a one-arm pipeline: the same probabilities
    (tmp_path / "kg.tsv").write_text("dog\tis a\tanimal\n", encoding="utf-8")
    (tmp_path / "kgwise.toml").write_text(
        f'[kg]\ngraph = "kg.tsv"\n\n[[arms]]\nname = "m"\nkind = "kgm"\nmodel = "kgm.pt"\n'
        f'data = "{data_dir}"\nprice = 0\n\n[router]\nbudget_calls = 10\n', encoding="utf-8")
    one = runner.invoke(app, ["ask", q.text, "--choices", "|".join(c.text for c in q.choices),
                              "--config", str(tmp_path / "kgwise.toml"), "--json", str(tmp_path / "a.json")])
    assert one.exit_code == 0, one.output
    got = json.loads((tmp_path / "a.json").read_text())
    assert got["arm"] == "m" and got["label"] == "ABCDE"[int(np.argmax(rows[0]["probabilities"]))]
    assert list(got["probabilities"].values()) == pytest.approx(rows[0]["probabilities"], abs=1e-5)
    bad = runner.invoke(
        app, ["kg", "model", "train", "--dataset", "medqa", "--out", str(out), "--data", str(data_dir)]
    )
    assert bad.exit_code == 2 and "csqa" in bad.output


def test_a_graph_model_s_knowledge_is_its_graph_ranked_to_the_question(
    kg: CSRGraph, data_dir: Path, sample: tuple[list[QuestionGraph], NodeTable, GraphBuilder]
) -> None:
    """The KG-model arm reports the paths of the graph it scored the choices over: each joins a question
    concept to a choice through the graph's edges, and its support ends at the chosen choice."""
    from kgwise.app.arms import model_knowledge

    _, _, builder = sample
    seen_support = 0
    for q in load("csqa", "ihtrain", data_dir)[:6]:
        graph = builder.build(q)
        labels = {kg.label(int(v)) for v in graph.nodes}
        facts = {(kg.label(int(graph.nodes[h])), kg.relation_name(int(r)), kg.label(int(graph.nodes[t])))
                 for h, r, t in graph.edges.tolist()}
        questions = {kg.label(int(v)) for v in graph.nodes[graph.question_mask]}
        for chosen in range(len(q.choices)):
            k = model_knowledge(kg, graph, chosen)
            assert {(t.head, t.relation, t.tail) for t in k.triples} == facts
            ends = {kg.label(int(v)) for v in graph.nodes[graph.choice_mask[chosen]]}
            for chain in k.paths:
                assert all((t.head, t.relation, t.tail) in facts for t in chain)
                assert {chain[0].head, chain[0].tail} & questions
            for chain in k.support:
                assert chain in k.paths and {chain[-1].head, chain[-1].tail} & ends
                assert {x for t in chain for x in (t.head, t.tail)} <= labels
            seen_support += bool(k.support)
    assert seen_support > 0
