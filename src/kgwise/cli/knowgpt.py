"""``kgwise answer`` (KnowGPT knowledge injection for one question), ``kgwise calibrate`` (split-conformal
answer sets for it) and ``kgwise eval knowgpt``."""

from __future__ import annotations

from dataclasses import replace
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
    listed,
    writable,
    write_json,
)
from kgwise.errors import ConfigError
from kgwise.kg.sources import GRAPH_FILE_HELP, GRAPH_SPEC_HELP
from kgwise.types import Question

_LLM_HELP = ("LLM spec: smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, gguf:PATH, "
             "openai:MODEL.")


def _parse_choices(text: str) -> list[str]:
    sep = "|" if "|" in text else ","
    choices = [c.strip() for c in text.split(sep) if c.strip()]
    if len(choices) < 2:
        raise ConfigError(f"--choices needs at least two answers separated by '|', got {text!r}")
    return choices


@app.command("answer")
@friendly_errors
def answer(
    kg: Annotated[str, typer.Option("--kg", help="The KG: " + GRAPH_SPEC_HELP + ".")],
    question: Annotated[str | None, typer.Argument(help="The question text (or --questions FILE).",
                                                   show_default=False)] = None,
    choices: Annotated[str | None, typer.Option(
        "--choices", help="Answer choices of QUESTION separated by '|'.")] = None,
    questions_file: Annotated[Path | None, typer.Option(
        "--questions", help="Answer every question of this file (JSONL: id, text, choices, gold?) into --out "
        "(resumable) instead of one QUESTION.", exists=True, dir_okay=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="With --questions: the answers (JSONL, one record per question after a fingerprint "
        "line; a rerun answers only the questions not yet there).", callback=writable)] = None,
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
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="With --questions: only the first N.")
                     ] = None,
    json_out: JsonOption = None,
) -> None:
    """Answer one multiple-choice QUESTION (or every question of --questions FILE) with knowledge from a KG
    (a graph file, or a SPARQL endpoint grounded through a label index) injected into the LLM's prompt;
    with --calibration, also its calibrated answer set (answered with the calibration's combination unless
    --combo says otherwise; see :mod:`kgwise.app.knowgpt`)."""
    from kgwise.app.knowgpt import KnowGPTApp
    from kgwise.types import make_question

    if alpha is not None and calibration is None:
        raise ConfigError("--alpha sets the miscoverage of a calibrated set: it needs --calibration FILE "
                          "(from `kgwise calibrate`)")
    inputs = {"--kg": None if kg.startswith("sparql:") else Path(kg), "--policy": policy, "--bandit": bandit,
              "--calibration": calibration,
              "--questions": questions_file}
    distinct_outputs({"--out": out, "--json": json_out}, inputs)
    if questions_file is not None:
        if question is not None or choices is not None:
            raise ConfigError("give one QUESTION with --choices, or --questions FILE, not both")
        if out is None:
            raise ConfigError("--questions FILE needs --out FILE (the answers, JSONL; a rerun resumes it)")
        from kgwise.datasets.user import read_questions

        batch = read_questions(questions_file)[:limit]
        open_ones = [q.ref for q in batch if not q.choices]
        if open_ones:
            raise ConfigError(f"{questions_file}: {len(open_ones)} question(s) have no choices "
                              f"({listed(open_ones)}): `kgwise answer` answers multiple-choice questions; "
                              "for open questions use `kgwise uag answer` or `kgwise ask`")
    else:
        if question is None or choices is None:
            raise ConfigError("give a QUESTION and its --choices, or --questions FILE --out FILE")
        if out is not None or limit is not None:
            raise ConfigError("--out and --limit go with --questions FILE")
    knowgpt = KnowGPTApp.build(kg, llm, policy, bandit, scoring, calibration, allow_mismatch, index=index)
    for line in knowgpt.mismatch:
        err_console.print(f"[yellow]warning:[/yellow] {line}")
    if questions_file is not None:
        from kgwise.progress import bar as progress_bar

        assert out is not None
        bar = progress_bar(total=len(batch), desc=f"answering {questions_file.name}", dynamic_ncols=True)
        report = knowgpt.answer_many(batch, out, combo, alpha, progress=lambda i, n: bar.update(1))
        bar.close()
        err_console.print(f"{report.answered} answered, {report.resumed} found in {out} from an earlier run")
        write_json(report.to_dict() | {"questions_file": str(questions_file)}, json_out)
        return
    assert question is not None and choices is not None
    q = make_question(question, _parse_choices(choices))
    r = knowgpt.answer(q, combo, alpha)
    for line in r.mismatch[len(knowgpt.mismatch):]:
        err_console.print(f"[yellow]warning:[/yellow] {line}")
    if json_out is not None:
        write_json(r.to_dict(), json_out)
        return
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
    kg: Annotated[Path, typer.Option("--kg", help="The graph file `kgwise answer` will use.")],
    out: Annotated[Path, typer.Option("--out", help="Calibration file to write (.json).", callback=writable)],
    dataset: Annotated[str | None, typer.Option(
        "--dataset", help="Labelled benchmark: csqa, obqa or medqa (or --questions).")] = None,
    split: Annotated[str | None, typer.Option(
        "--split", help="Its split used for calibration, e.g. ihdev.")] = None,
    questions_file: Annotated[Path | None, typer.Option(
        "--questions", help="Your labelled multiple-choice questions (JSONL: id, text, choices, gold | "
        "answer) instead of --dataset/--split.", exists=True, dir_okay=False)] = None,
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
    from kgwise.files import file_stamp, short_hash
    from kgwise.inject.build import build_injector
    from kgwise.inject.calibration import CalibrationConfig, collect_probabilities, pipeline_of
    from kgwise.inject.calibration import calibrate as run_calibration
    from kgwise.progress import bar as progress_bar

    distinct_outputs({"--out": out, "--json": json_out},
                     {"--kg": kg, "--policy": policy, "--bandit": bandit, "--questions": questions_file})
    cfg = CalibrationConfig(alpha=alpha, score=score)  # type: ignore[arg-type]
    questions, source = _labelled_questions(dataset, split, questions_file, data)
    questions = questions[:limit]
    if questions and not any(q.choices for q in questions):
        raise ConfigError(f"{source} has no answer choices: `kgwise calibrate` makes sets of choices; for "
                          "free-text KGQA, calibrate UAG (`kgwise uag calibrate`)")
    unusable = [q.ref for q in questions if not q.choices or q.gold_index is None]
    if unusable:
        raise ConfigError(f"{source}: {len(unusable)} question(s) have no choices or no gold answer "
                          f"({listed(unusable)}); every calibration question needs both")
    if len(questions) < cfg.min_questions:  # said before any question is answered
        raise ConfigError(f"--alpha {alpha:g} needs at least {cfg.min_questions} calibration questions, "
                          f"{source}{f' --limit {limit}' if limit else ''} gives {len(questions)}")
    err_console.print(f"calibrate: --alpha {alpha:g} needs at least {cfg.min_questions} calibration "
                      f"questions; {source} gives {len(questions)}")
    injector = build_injector(kg, llm, policy, bandit, scoring)
    # answers are kept per set of inputs, so a rerun resumes only a calibration of the same ones
    stamp = {"dataset": dataset, "split": split, "llm": llm, "combo": combo,
             "scoring": injector.config.scoring,
             "files": [file_stamp(p) if p is not None else None
                       for p in (kg, policy, bandit, questions_file)]}
    outcomes = out.with_name(f"{out.stem}.outcomes-{short_hash(stamp)}.jsonl")
    if not outcomes.is_file():  # a measured warm-up (its answers are kept) says what the rest will take
        from kgwise.progress import estimate_steps

        fingerprint = short_hash(stamp)
        est = estimate_steps(len(questions), lambda i: collect_probabilities(
            injector, questions[i:i + 1], combo, outcomes, fingerprint=fingerprint))
        err_console.print("calibrate: " + est.describe("questions to answer (one KnowGPT answer each)"))
    bar = progress_bar(total=len(questions), desc=f"calibrating on {source}", dynamic_ncols=True)
    rows = collect_probabilities(injector, questions, combo, outcomes, progress=lambda i, n: bar.update(1),
                                 fingerprint=short_hash(stamp))
    bar.close()
    conformal, report = run_calibration(rows, cfg)
    made_with = pipeline_of(injector, combo, policy, bandit)
    meta = {"dataset": dataset, "split": split, "kg": str(kg), "llm": llm,
            "questions_file": str(questions_file) if questions_file is not None else None,
            "policy": str(policy) if policy else None, "bandit": str(bandit) if bandit else None,
            "made_with": made_with}
    conformal.save(out, meta)
    write_json(report | {"calibration_file": str(out), "meta": meta}, json_out)


def _labelled_questions(dataset: str | None, split: str | None, questions_file: Path | None,
                        data: Path | None) -> tuple[list[Question], str]:
    """The questions of ``--dataset/--split`` or of ``--questions FILE`` (exactly one of them) and how
    messages name them."""
    if questions_file is not None:
        if dataset is not None or split is not None:
            raise ConfigError("give --questions FILE or --dataset/--split, not both")
        from kgwise.datasets.user import read_questions

        return read_questions(questions_file), str(questions_file)
    if dataset is None or split is None:
        raise ConfigError("give --dataset and --split, or --questions FILE")
    from kgwise.datasets import load

    return load(dataset, split, data), f"{dataset}/{split}"


@eval_app.command("knowgpt")
@friendly_errors
def eval_knowgpt(
    dataset: Annotated[str | None, typer.Option(
        "--dataset", help="csqa, obqa or medqa (or --questions FILE --kg GRAPH).")] = None,
    questions_file: Annotated[Path | None, typer.Option(
        "--questions", help="Your multiple-choice test questions (JSONL: id, text, choices, gold | answer) "
        "instead of --dataset; needs --kg.", exists=True, dir_okay=False)] = None,
    train_questions: Annotated[Path | None, typer.Option(
        "--train-questions", help="With --questions: the questions P_RL and the prompt bandit train on "
        "(default: a seeded half of --questions, the other half tested).", exists=True, dir_okay=False)
    ] = None,
    kg: Annotated[Path | None, typer.Option(
        "--kg", help="With --questions: the graph file (" + GRAPH_FILE_HELP + "); a --dataset brings its "
        "own KG.")] = None,
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
    combos: Annotated[str | None, typer.Option(
        "--combos", help="Only these (extractor+format) combinations, comma-separated, e.g. "
        "P_sub+F_t,P_sub+F_s (default: all six; without a P_RL one, P_RL is not trained).")] = None,
    config: ConfigOption = None,
    data: DataOption = None,
) -> None:
    """KnowGPT's Tables 3/4 on a benchmark or on your questions and KG: w/o KG, P_sub/P_RL × F_t/F_s/F_g,
    and full KnowGPT (resumable); says first how many LLM outcomes it needs and how long they will take."""
    from kgwise.eval.knowgpt import (
        DATASETS,
        SCORING,
        ExperimentConfig,
        KnowGPTData,
        markdown_table,
        run_experiment,
        user_data,
    )
    from kgwise.settings import configured

    inputs: str | KnowGPTData
    if questions_file is not None:
        if dataset is not None:
            raise ConfigError("give --dataset or --questions FILE, not both")
        if kg is None:
            raise ConfigError("--questions needs --kg GRAPH: a --dataset brings its own KG "
                              "(kgwise.kg.benchmarks), your questions need yours")
        distinct_outputs({"--json": json_out}, {"--questions": questions_file, "--kg": kg,
                                                "--train-questions": train_questions})
        inputs = user_data(kg, questions_file, train_questions)
        name = inputs.name
    else:
        given = [o for o, v in (("--kg", kg), ("--train-questions", train_questions)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} go with --questions FILE (a --dataset brings its own)")
        if dataset is None:
            raise ConfigError("give --dataset (csqa, obqa, medqa) or --questions FILE --kg GRAPH")
        if dataset not in DATASETS:
            raise ConfigError(f"unknown data set {dataset!r}; choose one of {', '.join(DATASETS)}, or give "
                              "your own: --questions FILE --kg GRAPH")
        inputs = name = dataset
    if scoring not in SCORING:
        raise ConfigError(f"--scoring must be one of {', '.join(SCORING)}, got {scoring!r}")
    chosen = tuple(c.strip() for c in combos.split(",") if c.strip()) if combos is not None else None
    cfg = ExperimentConfig(limit=limit, train_limit=train_limit, rl_iterations=rl_iterations,
                           rl_time_limit_s=rl_minutes * 60, scoring=scoring,
                           agent=configured("path_agent", config, max_steps=rl_max_steps),
                           bandit=configured("prompt_bandit", config, feedback=bandit_feedback))
    if chosen is not None:
        cfg = replace(cfg, combos=chosen)
    run_dir = out_dir or Path("runs") / "knowgpt" / f"{name}-{llm.replace(':', '_').replace('/', '_')}"
    report = run_experiment(inputs, llm, run_dir, cfg, data, log=lambda m: err_console.print(m, markup=False))
    write_json(report, json_out)
    table = markdown_table({name: report})
    console.print(table, markup=False)
    if json_out is not None:
        json_out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
