"""Every own-data command on a small hand-made drug/disease KG and labelled questions (not a benchmark),
through the CLI: the files are the documented formats (README "Your own data")."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kgwise.cli.main import app

runner = CliRunner()

DRUGS = ["aspirin", "ibuprofen", "insulin", "metformin", "warfarin", "heparin", "amoxicillin", "penicillin",
         "omeprazole", "lisinopril", "atorvastatin", "albuterol", "prednisone", "levothyroxine"]
DISEASES = ["headache", "fever", "diabetes", "thrombosis", "pneumonia", "ulcer", "hypertension",
            "high cholesterol", "asthma", "arthritis", "hypothyroidism", "migraine", "otitis", "gastritis",
            "angina", "bronchitis", "gout", "eczema", "sinusitis", "tonsillitis", "cystitis", "stroke"]


def said(result: Result) -> str:
    return " ".join(result.output.split())


def _jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A domain KG (TSV: disease —treated_by→ drug, drug —class→ kind), 22 open questions with gold
    answers and topic entities, an LLM's recorded answers (mostly right), a scored retriever's candidates,
    a graded log of three arms, a few multiple-choice questions and the same 22 questions as multiple
    choice (``mcq``: the right drug and two others, the answer given by its text)."""
    rng = random.Random(0)
    d = tmp_path_factory.mktemp("own")
    treats = {dis: DRUGS[i % len(DRUGS)] for i, dis in enumerate(DISEASES)}
    triples = [(dis, "treated_by", drug) for dis, drug in treats.items()]
    triples += [(drug, "drug_class", "analgesic" if i % 2 else "antibiotic") for i, drug in enumerate(DRUGS)]
    (d / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    (d / "kg_reversed.tsv").write_text("".join(f"{t}\ttreats\t{h}\n" for h, r, t in triples
                                               if r == "treated_by"), encoding="utf-8")
    qs = [{"id": f"q{i}", "text": f"Which drug treats {dis}?", "gold": [drug], "topic_entities": [dis]}
          for i, (dis, drug) in enumerate(treats.items())]
    _jsonl(d / "questions.jsonl", qs)
    gens = [{"id": q["id"], "answer": q["gold"][0] if rng.random() < 0.8 else rng.choice(DRUGS)}
            for q in qs]
    _jsonl(d / "generations.jsonl", gens)
    cands = []
    for q in qs:
        gold = q["gold"][0]
        others = rng.sample([x for x in DRUGS if x != gold], 3)
        cands.append({"id": q["id"], "candidates": [[gold, round(rng.uniform(0.3, 0.9), 3)]]
                      + [[o, round(rng.uniform(0.0, 0.6), 3)] for o in others]})
    _jsonl(d / "candidates.jsonl", cands)
    log = []
    for q in qs:
        gold = q["gold"][0]
        kg_ok, big_ok, small_ok = rng.random() < 0.6, rng.random() < 0.9, rng.random() < 0.7
        log.append({"id": q["id"], "text": q["text"], "arms": {
            "kg-model": {"answer": gold if kg_ok else "aspirin", "correct": kg_ok, "cost": 0,
                         "signals": [round(rng.uniform(0.5, 1.0) if kg_ok else rng.uniform(0, 0.6), 3)]},
            "big-llm": {"answer": gold if big_ok else "?", "correct": big_ok, "cost": 0.01},
            "gpt-4o-mini": {"answer": gold if small_ok else "?", "correct": small_ok,
                          "usage": {"input_tokens": 40, "output_tokens": 5, "calls": 1}}}})
    _jsonl(d / "graded.jsonl", log)
    _jsonl(d / "mc.jsonl", [
        {"id": "m1", "text": "Which drug lowers blood sugar?", "choices": ["insulin", "aspirin"],
         "answer": "insulin"},
        {"id": "m2", "text": "Which of these is an antibiotic?",
         "choices": {"A": "amoxicillin", "B": "heparin"}, "gold": ["A"]},
    ])
    mcq = []
    for q in qs:
        gold = q["gold"][0]
        choices = [gold, *rng.sample([x for x in DRUGS if x != gold], 2)]
        rng.shuffle(choices)
        mcq.append({"id": q["id"], "text": q["text"], "choices": choices, "answer": gold})
    _jsonl(d / "mcq.jsonl", mcq)
    return {p.stem: p for p in d.iterdir()}


def test_eval_uag_on_own_questions(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "uag.json"
    args = ["eval", "uag", "--questions", str(own["questions"]), "--kg", str(own["kg"]), "--generations",
            str(own["generations"]), "--candidates", str(own["candidates"]), "--splits", "2",
            "--alphas", "0.3,0.5", "--tune-fraction", "0.3", "--cal-fraction", "0.4", "--json", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert {"uag", "uag_gnn", "split_cp", "top_k"} <= set(rep) and rep["meta"]["data"] == "own"
    assert rep["meta"]["questions"] == 22 and rep["meta"]["gold_retrievable"] == 1.0
    assert "paper" not in rep["table6_markdown"] and "needs at least" in said(res)
    # without candidates, the methods that need a scored retriever are not run
    res = runner.invoke(app, args[:8] + args[10:])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert "uag" in rep and "split_cp" not in rep and "uag_gnn" not in rep


def test_low_reachability_names_the_option(own: dict[str, Path], tmp_path: Path) -> None:
    """Stored drug → disease, the questions' diseases reach no drug along out-edges: said, with the fix."""
    res = runner.invoke(app, ["eval", "uag", "--questions", str(own["questions"]), "--kg",
                              str(own["kg_reversed"]), "--generations", str(own["generations"]), "--splits",
                              "1", "--alphas", "0.5", "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "--direction both" in said(res)


@pytest.mark.slow
def test_eval_route_on_own_graded_log(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "route.json"
    res = runner.invoke(app, ["eval", "route", "--log", str(own["graded"]), "--arm", "kg-model:KGM:0.6",
                              "--arm", "big-llm:LLM:0.9", "--arm", "gpt-4o-mini:LLM:0.7", "--seeds", "2",
                              "--no-tune", "--no-sensitivity", "--no-plots", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["coverage"]["graded_on_every_arm"] == 22 and rep["coverage"]["left_out"] == 0
    assert "free_gnn_signals" in rep["context_variants"] and "gpt4_subset" not in rep
    res = runner.invoke(app, ["eval", "route", "--log", str(own["graded"]), "--arm", "nope:LLM:0.5"])
    assert res.exit_code != 0 and "nope" in said(res)
    # usage is priced by the arm's name: an arm the price table does not know is named
    odd = _jsonl(tmp_path / "odd.jsonl", [{"id": "q1", "text": "t", "arms": {"mystery": {
        "answer": "a", "correct": True, "usage": {"input_tokens": 3, "output_tokens": 1}}}}])
    res = runner.invoke(app, ["eval", "route", "--log", str(odd), "--arm", "mystery:LLM:0.5"])
    assert res.exit_code == 2 and "model 'mystery' (arm 'mystery' of" in said(res)
    assert "give the cost itself instead of token usage" in said(res)


@pytest.mark.slow
def test_eval_llm_on_own_questions(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "llm.json"
    res = runner.invoke(app, ["eval", "llm", "--questions", str(own["mc"]), "--llm", "smollm2-135m",
                              "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["n"] == 2 and rep["labelled"] == 2 and rep["accuracy"] in (0.0, 0.5, 1.0)


# ------------------------------------------------------------ --questions on every command, batch, --json
def test_own_questions_need_their_kg_and_say_so(own: dict[str, Path], tmp_path: Path) -> None:
    """Where a --dataset would have picked the KG, --questions needs --kg, and the error says so (before
    any model loads); a file and a data set at once, or a batch without --out, are refused."""
    q, kg = str(own["mcq"]), str(own["kg"])
    cases = [
        (["eval", "knowgpt", "--questions", q], "--questions needs --kg"),
        (["eval", "knowgpt", "--dataset", "obqa", "--kg", kg], "--kg go with --questions"),
        (["kg", "model", "train", "--questions", q, "--out", str(tmp_path / "m.pt")],
         "--questions needs --kg"),
        (["kg", "model", "train", "--questions", q, "--kg", kg, "--reserve", "0:2", "--out",
          str(tmp_path / "m.pt")], "--reserve goes with --dataset"),
        (["kg", "model", "train", "--dataset", "csqa", "--reserve", "4-8", "--out", str(tmp_path / "m.pt")],
         "--reserve must be START:STOP (two whole numbers), got '4-8'"),
        (["eval", "route-live", "--questions", q, "--arm", "smollm2-135m+kg"], "needs --kg GRAPH"),
        (["eval", "kgm", "--model", str(tmp_path / "m.pt"), "--questions", q, "--dataset", "csqa"],
         "not both"),
        (["bench", "conformal", "--questions", "60"], "the number of calibration questions is --n-questions"),
        (["bench", "conformal", "--questions", str(own["questions"])], "--questions needs --kg"),
        (["bench", "serve", "--questions", q], "--questions needs --kg GRAPH"),
        (["eval", "pipeline", "--arm", "kg-model:KGM:0.6"], "--arm goes with --log FILE"),
    ]
    for args, said_ in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert said_ in said(res), (args, said(res))


def test_bench_conformal_on_own_questions(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    res = runner.invoke(app, ["bench", "conformal", "--questions", str(own["questions"]), "--kg",
                              str(own["kg"]), "--generations", str(own["generations"]), "--steps",
                              "0.25,0.25,0.25", "--baseline-sample", "5", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["calibration_questions"] == 22 and rep["tables"] == str(own["questions"])
    res = runner.invoke(app, ["bench", "conformal", "--questions", str(own["questions"]), "--kg",
                              str(own["kg"]), "--generations", str(own["generations"]),
                              "--n-questions", "23"])
    assert res.exit_code == 2 and "the tables hold 22 questions" in said(res)


@pytest.mark.slow
def test_one_arm_knowgpt_fit_on_own_questions_then_ask(own: dict[str, Path], tmp_path: Path) -> None:
    """A single KnowGPT tool on the user's KG: `init --arm x=inject:LLM`, `fit` on their labelled
    multiple-choice questions (the arm's split-conformal calibration), then `ask`: a set with α."""
    config = tmp_path / "kgwise.toml"
    res = runner.invoke(app, ["init", "--kg", str(own["kg"]), "--arm", "knowgpt=inject:smollm2-135m",
                              "--budget-calls", "1000", "--alpha", "0.3", "--out", str(config)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["fit", "--config", str(config), "--questions", str(own["mcq"]), "--max-spend",
                              "1000", "--json",
                              str(tmp_path / "fit.json")])
    assert res.exit_code == 0, res.output
    arms = json.loads((tmp_path / "fit.json").read_text())["arms"]
    assert [a["name"] for a in arms] == ["knowgpt"] and arms[0]["answered"] == 22
    res = runner.invoke(app, ["ask", "Which drug treats gout?", "--choices", "insulin|aspirin|warfarin",
                              "--config", str(config), "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["arm"] == "knowgpt" and a["answer_set"]["alpha"] == 0.3 and a["answer_set"]["labels"]


@pytest.mark.slow
def test_eval_knowgpt_on_own_questions(own: dict[str, Path], tmp_path: Path) -> None:
    """Bandit and P_RL trained on the user's questions over their KG; the estimate comes first."""
    out = tmp_path / "k.json"
    res = runner.invoke(app, ["eval", "knowgpt", "--questions", str(own["mcq"]), "--kg", str(own["kg"]),
                              "--rl-iterations", "1", "--train-limit", "2", "--limit", "2", "--out-dir",
                              str(tmp_path / "run"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "outcomes to measure" in said(res) and "LLM calls" in said(res)
    rep = json.loads(out.read_text())
    assert rep["dataset"] == "mcq" and rep["kg"]["nodes"] == len(DISEASES) + len(DRUGS) + 2
    assert rep["splits"]["test-half"]["n"] == 2 and rep["p_rl_training"]["train_questions"] == 11
    assert rep["bandit_training"]["questions"] == 2


@pytest.mark.slow
def test_kgm_train_eval_and_ask_on_own_kg(own: dict[str, Path], tmp_path: Path) -> None:
    model = tmp_path / "kgm.pt"
    res = runner.invoke(app, ["kg", "model", "train", "--questions", str(own["mcq"]), "--kg", str(own["kg"]),
                              "--epochs", "2", "--out", str(model), "--json", str(tmp_path / "t.json")])
    assert res.exit_code == 0, res.output
    assert "training: 2 epochs × 1 batches at most, 2 steps; the first 1 took" in said(res), said(res)
    rep = json.loads((tmp_path / "t.json").read_text())
    assert rep["dataset"] == "mcq" and rep["train_questions"] == 18 and len(rep["history"]) <= 2
    res = runner.invoke(app, ["eval", "kgm", "--model", str(model), "--questions", str(own["mcq"]), "--json",
                              str(tmp_path / "e.json")])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "e.json").read_text())
    assert ev["mcq"]["questions"] == 22 and 0.0 <= ev["mcq"]["accuracy"] <= 1.0
    config = tmp_path / "kgwise.toml"  # the model answers as a pipeline's one arm
    res = runner.invoke(app, ["init", "--kg", str(own["kg"]), "--arm", f"m=kgm:{model}", "--budget-calls",
                              "10", "--out", str(config)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["ask", "Which drug treats gout?", "--choices", "insulin|aspirin", "--config",
                              str(config), "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["arm"] == "m" and a["answer"] in ("insulin", "aspirin") and a["label"] in ("A", "B")


@pytest.mark.slow
def test_eval_route_live_and_pipeline_on_own_data(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    res = runner.invoke(app, ["eval", "route-live", "--questions", str(own["mcq"]), "--kg", str(own["kg"]),
                              "--arm", "smollm2-135m", "--arm", "smollm2-135m+kg", "--limit", "4", "--seeds",
                              "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["setup"]["dataset"] == "mcq" and len(rep["live_arms"]) == 2
    out = tmp_path / "pipe.json"
    res = runner.invoke(app, ["eval", "pipeline", "--log", str(own["graded"]), "--arm", "kg-model:KGM:0.6",
                              "--arm", "big-llm:LLM:0.9", "--splits", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["dataset"] == "graded" and rep["coverage"]["graded_on_every_arm"] == 22


@pytest.mark.slow
def test_route_settle_cancel_json(own: dict[str, Path], tmp_path: Path) -> None:
    """External arms over the user's KG: `kgwise init` writes them, `kgwise route select` / `settle` /
    `cancel` write --json, `kgwise status` counts what waits."""
    config, sel = tmp_path / "kgwise.toml", tmp_path / "sel.json"
    res = runner.invoke(app, ["init", "--kg", str(own["kg"]), "--arm", "kg-model=external:0",
                              "--arm", "big-llm=external:0.01", "--arm", "gpt-4o-mini=external:0.001",
                              "--budget-usd", "1", "--out", str(config)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["route", "select", "Which drug treats gout?", "--config", str(config),
                              "--json", str(sel)])
    assert res.exit_code == 0, res.output
    decision = json.loads(sel.read_text())
    assert decision["arm"] in ("kg-model", "big-llm", "gpt-4o-mini") and decision["unit"] == "usd"
    res = runner.invoke(app, ["route", "settle", decision["decision"], "--correct", "--cost", "0",
                              "--config", str(config), "--json", str(tmp_path / "fb.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "fb.json").read_text())["outcome"] == "settled"
    res = runner.invoke(app, ["route", "select", "Which drug treats fever?", "--cost", "big-llm=0.001",
                              "--config", str(config), "--json", str(sel)])
    assert res.exit_code == 0, res.output
    held = json.loads(sel.read_text())
    assert held["bound"] <= 0.001
    res = runner.invoke(app, ["route", "settle", held["decision"], "--correct", "--cost", "0.5",
                              "--config", str(config)])
    assert res.exit_code == 2 and "above the bound" in said(res)
    res = runner.invoke(app, ["status", "--config", str(config), "--json", str(tmp_path / "st.json")])
    assert res.exit_code == 0 and json.loads((tmp_path / "st.json").read_text())["routed"] == 1
    res = runner.invoke(app, ["route", "cancel", held["decision"], "--config", str(config), "--json",
                              str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "c.json").read_text())["outcome"] == "cancelled"
    res = runner.invoke(app, ["route", "cancel", held["decision"], "--config", str(config)])
    assert res.exit_code == 2 and "cancelled" in said(res)
