"""Every command of issue 28 on a small hand-made drug/disease KG and labelled questions (not a benchmark),
through the CLI: the files are the documented formats (README "Your own data")."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from kgwise.cli.main import app

runner = CliRunner()

DRUGS = ["aspirin", "ibuprofen", "insulin", "metformin", "warfarin", "heparin", "amoxicillin", "penicillin",
         "omeprazole", "lisinopril", "atorvastatin", "albuterol", "prednisone", "levothyroxine"]
DISEASES = ["headache", "fever", "diabetes", "thrombosis", "pneumonia", "ulcer", "hypertension",
            "high cholesterol", "asthma", "arthritis", "hypothyroidism", "migraine", "otitis", "gastritis",
            "angina", "bronchitis", "gout", "eczema", "sinusitis", "tonsillitis", "cystitis", "stroke"]


def said(result: Result) -> str:
    return " ".join(result.output.split())


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A domain KG (TSV: disease —treated_by→ drug, drug —class→ kind), 22 open questions with gold
    answers and topic entities, an LLM's recorded answers (mostly right), a scored retriever's candidates,
    a graded log of three arms and a few multiple-choice questions."""
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
    gens = [{"id": q["id"], "answer": q["gold"][0] if rng.random() < 0.8 else rng.choice(DRUGS)}  # type: ignore[index]
            for q in qs]
    _jsonl(d / "generations.jsonl", gens)
    cands = []
    for q in qs:
        gold = q["gold"][0]  # type: ignore[index]
        others = rng.sample([x for x in DRUGS if x != gold], 3)
        cands.append({"id": q["id"], "candidates": [[gold, round(rng.uniform(0.3, 0.9), 3)]]
                      + [[o, round(rng.uniform(0.0, 0.6), 3)] for o in others]})
    _jsonl(d / "candidates.jsonl", cands)
    log = []
    for q in qs:
        gold = q["gold"][0]  # type: ignore[index]
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


def test_uag_calibrate_says_the_sample_size_first(own: dict[str, Path], tmp_path: Path) -> None:
    res = runner.invoke(app, ["uag", "calibrate", "--kg", str(own["kg"]), "--questions",
                              str(own["questions"]), "--generations", str(own["generations"]), "--alpha",
                              "0.05", "--out", str(tmp_path / "u.json"), "--work", str(tmp_path / "w")])
    assert res.exit_code == 2 and "needs at least 59 calibration questions" in said(res)
    assert not (tmp_path / "w").exists()  # nothing was built


@pytest.mark.slow
def test_uag_calibrate_and_answer_on_own_kg(own: dict[str, Path], tmp_path: Path) -> None:
    cal = tmp_path / "u.json"
    res = runner.invoke(app, ["uag", "calibrate", "--kg", str(own["kg"]), "--questions",
                              str(own["questions"]), "--generations", str(own["generations"]), "--alpha",
                              "0.4", "--delta", "0.1", "--out", str(cal), "--work", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    assert "needs at least 5 calibration questions; there are 13" in said(res)
    res = runner.invoke(app, ["uag", "answer", "Which drug treats gout?", "--topic", "gout", "--kg",
                              str(own["kg"]), "--uag", str(cal), "--llm", "smollm2-135m",
                              "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "a.json").read_text())["alpha"] == 0.4


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
    assert res.exit_code == 2 and "'mystery' is not in the price table" in said(res)


@pytest.mark.slow
def test_eval_llm_on_own_questions(own: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "llm.json"
    res = runner.invoke(app, ["eval", "llm", "--questions", str(own["mc"]), "--llm", "smollm2-135m",
                              "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["n"] == 2 and rep["labelled"] == 2 and rep["accuracy"] in (0.0, 0.5, 1.0)
