"""``kgwise answer`` (KnowGPT knowledge injection for one question), ``kgwise calibrate`` (split-conformal
answer sets for it) and ``kgwise eval knowgpt``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app, eval_app
from kgwise.cli.common import (
    BanditOption,
    ConfigOption,
    DataOption,
    JsonOption,
    PolicyOption,
    ScoringOption,
    console,
    distinct_outputs,
    err_console,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.errors import ConfigError
from kgwise.kg.sources import GRAPH_SPEC_HELP

_LLM_HELP = "LLM spec: smollm2-135m, gemma3-270m, gguf:PATH, openai:MODEL."


def _parse_choices(text: str) -> list[str]:
    sep = "|" if "|" in text else ","
    choices = [c.strip() for c in text.split(sep) if c.strip()]
    if len(choices) < 2:
        raise ConfigError(f"--choices needs at least two answers separated by '|', got {text!r}")
    return choices


@app.command("answer")
@friendly_errors
def answer(
    question: Annotated[str, typer.Argument(help="The question text.")],
    choices: Annotated[str, typer.Option("--choices", help="Answer choices separated by '|'.")],
    kg: Annotated[str, typer.Option("--kg", help="The KG: " + GRAPH_SPEC_HELP + ".")],
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = "smollm2-135m",
    index: Annotated[Path | None, typer.Option(
        "--index", help="A label index of the KG (`kgwise kg index build`; for an endpoint, best built from "
        "the graph file it was loaded from): the free text is grounded over it. An endpoint without one "
        "gets an index built from its labels once and cached.")] = None,
    policy: PolicyOption = None,
    bandit: BanditOption = None,
    combo: Annotated[str | None, typer.Option(
        "--combo", help="Force a combination, e.g. P_sub+F_s (default: the --calibration's, else the "
        "bandit's pick, else P_sub+F_s)."
    )] = None,
    calibration: Annotated[Path | None, typer.Option(
        "--calibration", help="A file written by `kgwise calibrate`: also print the calibrated answer set."
    )] = None,
    alpha: Annotated[float | None, typer.Option(
        "--alpha", help="Miscoverage of the calibrated set (default: the calibration's).")] = None,
    allow_mismatch: Annotated[bool, typer.Option(
        "--allow-mismatch", help="Print the calibrated set even when the KG, LLM, combination, scoring, "
        "policy or bandit differ from the calibration's (the set then carries no guarantee).")] = False,
    scoring: ScoringOption = None,
) -> None:
    """Answer one multiple-choice QUESTION with knowledge from a KG (a graph file, or a SPARQL endpoint
    grounded through a label index) injected into the LLM's prompt; with
    --calibration, also its calibrated answer set (answered with the calibration's combination unless
    --combo says otherwise; see :mod:`kgwise.app.knowgpt`)."""
    from kgwise.app.knowgpt import KnowGPTApp
    from kgwise.types import make_question

    q = make_question(question, _parse_choices(choices))
    if alpha is not None and calibration is None:
        raise ConfigError("--alpha sets the miscoverage of a calibrated set: it needs --calibration FILE "
                          "(from `kgwise calibrate`)")
    knowgpt = KnowGPTApp.build(kg, llm, policy, bandit, scoring, calibration, allow_mismatch, index=index)
    for line in knowgpt.mismatch:
        err_console.print(f"[yellow]warning:[/yellow] {line}")
    r = knowgpt.answer(q, combo, alpha)
    for line in r.mismatch[len(knowgpt.mismatch):]:
        err_console.print(f"[yellow]warning:[/yellow] {line}")
    console.print(f"[bold]answer:[/bold] {r.prediction}) {r.choice_text}")
    for c in q.choices:
        console.print(f"  {c.label}) {c.text}: {r.probabilities.get(c.label, 0.0):.3f}")
    if r.guaranteed is not None:
        shown = ", ".join(r.calibrated_set) if r.calibrated_set else "(empty)"
        if r.calibrated_set is None:
            console.print("[bold]calibrated set[/bold]: none, the calibration was made with another "
                          "combination (--allow-mismatch shows one without the guarantee)")
        else:
            claim = ("[bold red]no guarantee[/bold red]: made by another pipeline" if not r.guaranteed
                     else f"holds the answer w.p. ≥ {1 - (r.alpha or 0.0):.2f}")
            console.print(f"[bold]calibrated set[/bold] ({claim}): {shown}")
    console.print(f"[bold]combination:[/bold] {r.combination}, choices ranked by {r.scoring}")
    console.print("[bold]knowledge:[/bold]")
    console.print(r.knowledge or "(none found)", markup=False)
    u = r.usage
    console.print(f"[bold]usage:[/bold] {u.calls} LLM calls ({u.cached_calls} cached), "
                  f"{u.input_tokens} input + {u.output_tokens} output tokens, {u.latency_s:.2f} s LLM time, "
                  f"cost {u.cost:.6f}; "
                  f"grounding+extraction+rendering {r.prep_ms:.1f} ms")


@app.command("calibrate")
@friendly_errors
def calibrate(
    dataset: Annotated[str, typer.Option("--dataset", help="Labelled data: csqa, obqa or medqa.")],
    split: Annotated[str, typer.Option("--split", help="Its split used for calibration, e.g. ihdev.")],
    kg: Annotated[Path, typer.Option("--kg", help="The graph file `kgwise answer` will use.")],
    out: Annotated[Path, typer.Option("--out", help="Calibration file to write (.json).", callback=writable)],
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = "smollm2-135m",
    policy: PolicyOption = None,
    bandit: BanditOption = None,
    combo: Annotated[str | None, typer.Option(
        "--combo", help="The combination `kgwise answer` will use (default: the bandit's, else P_sub+F_s).")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N questions.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Default miscoverage of the sets.")] = 0.1,
    score: Annotated[str, typer.Option("--score", help="Non-conformity score: lac or aps.")] = "lac",
    json_out: JsonOption = None,
    data: DataOption = None,
    scoring: ScoringOption = None,
) -> None:
    """Calibrate answer sets for `kgwise answer` / `kgwise serve` on labelled questions (split conformal
    prediction, LAC or APS); resumable. Reports coverage and set size on held-out halves."""
    from kgwise.datasets import load
    from kgwise.files import file_stamp, short_hash
    from kgwise.inject.build import build_injector
    from kgwise.inject.calibration import CalibrationConfig, collect_probabilities, pipeline_of
    from kgwise.inject.calibration import calibrate as run_calibration
    from kgwise.progress import bar as progress_bar

    distinct_outputs({"--out": out, "--json": json_out}, {"--kg": kg, "--policy": policy, "--bandit": bandit})
    cfg = CalibrationConfig(alpha=alpha, score=score)  # type: ignore[arg-type]
    questions = load(dataset, split, data)[:limit]
    if questions and not any(q.choices for q in questions):
        raise ConfigError(f"{dataset} has no answer choices: `kgwise calibrate` makes sets of choices; for "
                          "free-text KGQA, calibrate UAG (`kgwise uag calibrate`)")
    if len(questions) < cfg.min_questions:  # said before any question is answered
        raise ConfigError(f"--alpha {alpha:g} needs at least {cfg.min_questions} calibration questions, "
                          f"{dataset}/{split}{f' --limit {limit}' if limit else ''} gives {len(questions)}")
    injector = build_injector(kg, llm, policy, bandit, scoring)
    # answers are kept per set of inputs, so a rerun resumes only a calibration of the same ones
    stamp = {"dataset": dataset, "split": split, "llm": llm, "combo": combo,
             "scoring": injector.config.scoring,
             "files": [file_stamp(p) if p is not None else None for p in (kg, policy, bandit)]}
    outcomes = out.with_name(f"{out.stem}.outcomes-{short_hash(stamp)}.jsonl")
    if not outcomes.is_file():  # a measured warm-up (its answers are kept) says what the rest will take
        from kgwise.progress import estimate

        fingerprint = short_hash(stamp)
        est = estimate(len(questions), lambda: len(collect_probabilities(
            injector, questions[:2], combo, outcomes, fingerprint=fingerprint)))
        err_console.print("calibrate: " + est.describe("questions to answer (one KnowGPT answer each)"))
    bar = progress_bar(total=len(questions), desc=f"calibrating on {dataset}/{split}", dynamic_ncols=True)
    rows = collect_probabilities(injector, questions, combo, outcomes, progress=lambda i, n: bar.update(1),
                                 fingerprint=short_hash(stamp))
    bar.close()
    conformal, report = run_calibration(rows, cfg)
    made_with = pipeline_of(injector, combo, policy, bandit)
    meta = {"dataset": dataset, "split": split, "kg": str(kg), "llm": llm,
            "policy": str(policy) if policy else None, "bandit": str(bandit) if bandit else None,
            "made_with": made_with}
    conformal.save(out, meta)
    write_json(report | {"calibration_file": str(out), "meta": meta}, json_out)


@eval_app.command("knowgpt")
@friendly_errors
def eval_knowgpt(
    dataset: Annotated[str, typer.Option("--dataset", help="csqa, obqa or medqa.")],
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = "smollm2-135m",
    json_out: JsonOption = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Test questions per split.")] = None,
    train_limit: Annotated[int, typer.Option(
        "--train-limit", min=1, help="Bandit training questions.")] = 200,
    rl_iterations: Annotated[int, typer.Option(
        "--rl-iterations", min=1, help="P_RL gradient updates.")] = 300,
    rl_minutes: Annotated[float, typer.Option(
        "--rl-minutes", min=0, help="Time limit of P_RL training.")] = 25.0,
    rl_max_steps: Annotated[int | None, typer.Option(
        "--rl-max-steps", min=1, help="K of Eq. 2: steps P_RL may take to reach a choice (WordNet needs "
        "4–5) (default: the --config's, else 3).", show_default=False)] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="Run directory (outcomes, policy, bandit; reused to resume)."
    )] = None,
    scoring: Annotated[str, typer.Option(
        "--scoring", help="Rank choices by the sum ('sum') or per-token mean ('mean') of log-probabilities, "
        "by 'pmi' (the sum minus the choice's context-free log-probability), or 'auto': the rule that "
        "answers most bandit-training questions right without knowledge."
    )] = "auto",
    bandit_feedback: Annotated[str | None, typer.Option(
        "--bandit-feedback", help="Train the prompt bandit on every combination's reward per training "
        "question ('full') or on the pulled one's only ('bandit', the paper; also replayed under 'full') "
        "(default: the --config's, else full).", show_default=False)] = None,
    config: ConfigOption = None,
    data: DataOption = None,
) -> None:
    """KnowGPT's Tables 3/4 on our data: w/o KG, P_sub/P_RL × F_t/F_s/F_g, and full KnowGPT (resumable)."""
    from kgwise.eval.knowgpt import DATASETS, SCORING, ExperimentConfig, markdown_table, run_experiment
    from kgwise.settings import configured

    if dataset not in DATASETS:
        raise ConfigError(f"unknown data set {dataset!r}; choose one of {', '.join(DATASETS)}")
    if scoring not in SCORING:
        raise ConfigError(f"--scoring must be one of {', '.join(SCORING)}, got {scoring!r}")
    cfg = ExperimentConfig(limit=limit, train_limit=train_limit, rl_iterations=rl_iterations,
                           rl_time_limit_s=rl_minutes * 60, scoring=scoring,
                           agent=configured("path_agent", config, max_steps=rl_max_steps),
                           bandit=configured("prompt_bandit", config, feedback=bandit_feedback))
    run_dir = out_dir or Path("runs") / "knowgpt" / f"{dataset}-{llm.replace(':', '_').replace('/', '_')}"
    report = run_experiment(dataset, llm, run_dir, cfg, data, log=lambda m: console.print(m, markup=False))
    write_json(report, json_out)
    table = markdown_table({dataset: report})
    console.print(table, markup=False)
    if json_out is not None:
        json_out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
