"""``kgwise ask`` (one question to one LLM) and ``kgwise eval llm`` (the "w/o KG" baseline)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app, eval_app
from kgwise.cli.common import (
    DataOption,
    JsonOption,
    console,
    distinct_outputs,
    err_console,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.config import cache_dir
from kgwise.errors import ConfigError
from kgwise.llm.local_models import DEFAULT_LLM, answers_by_letter, default_scoring

LlmOption = Annotated[
    str, typer.Option("--llm", help="smollm2-135m, gemma3-270m, gguf:PATH, openai:MODEL, replay:…")
]
MethodOption = Annotated[
    str,
    typer.Option("--method", help="Multiple choice: score (sum log-prob), score-mean (per token), "
                 "score-pmi (sum minus the choice's prior log-prob), letter."),
]
CacheOption = Annotated[bool, typer.Option("--cache/--no-cache", help="Use the persistent response cache.")]


@app.command("ask")
@friendly_errors
def ask(
    question: Annotated[str | None, typer.Argument(help="The question text.", show_default=False)] = None,
    choices: Annotated[str | None, typer.Option("--choices", help='Options separated by "|".')] = None,
    llm: LlmOption = DEFAULT_LLM,
    method: Annotated[str | None, typer.Option(
        "--method", help="Multiple choice: score (sum log-prob), score-mean (per token), score-pmi (sum "
        "minus the choice's prior log-prob), letter (default: the model's measured best: letter for "
        "qwen2.5-coder-1.5b, else its scoring rule, sum for an unmeasured model).",
        show_default=False)] = None,
    knowledge: Annotated[str, typer.Option(help="Knowledge to put before the question.")] = "",
    cache: CacheOption = False,
    json_out: JsonOption = None,
    config: Annotated[Path | None, typer.Option(
        "--config", help="A pipeline's kgwise.toml: route, answer and calibrate through it (--llm, "
        "--method, --knowledge and --cache are then the config's business).", show_default=False)] = None,
    state: Annotated[Path | None, typer.Option(
        "--state", help="With --config: its state directory (default .kgwise-state/ beside it).",
        show_default=False)] = None,
    questions: Annotated[Path | None, typer.Option(
        "--questions", exists=True, dir_okay=False, help="With --config: a JSONL file of questions (id, "
        "text, choices?) to answer, models loaded once; resumable.", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", callback=writable, help="With --questions: the answers, one JSON line each (every field "
        "of a single answer, with the question's id).", show_default=False)] = None,
) -> None:
    """Answer QUESTION (or a --questions file) through the pipeline of --config: the routed arm, its
    knowledge, the calibrated set, the cost and a decision id. Without --config: one LLM, no KG."""
    if (questions is None) != (out is None):
        raise ConfigError("--questions and --out go together")
    if questions is not None:
        if config is None or question is not None or choices is not None:
            raise ConfigError("--questions answers a file through a pipeline: give --config, and no "
                              "QUESTION or --choices")
        from kgwise.cli.pipeline import ask_file

        assert out is not None
        ask_file(questions, out, config, state, json_out)
        return
    if question is None:
        raise ConfigError("give a QUESTION (or --questions FILE --out FILE with --config)")
    if config is not None:
        from kgwise.cli.pipeline import ask_pipeline

        ask_pipeline(question, choices, config, state, json_out)
        return
    if state is not None:
        raise ConfigError("--state goes with --config")
    from kgwise.llm import get_llm
    from kgwise.llm.answering import METHOD_OF_RULE, METHODS, MCConfig, answer_free_text, answer_mc
    from kgwise.types import Question, make_question

    method = method or ("letter" if answers_by_letter(llm) else METHOD_OF_RULE[default_scoring(llm)])
    if method not in METHODS:
        raise ConfigError(f"unknown --method {method!r}; use {', '.join(METHODS)}")
    if choices is not None:
        q = make_question(question, choices.split("|"))
    elif question.strip():
        q = Question("", question)
    else:
        raise ConfigError("the question text is empty")
    model = get_llm(llm, cache=cache)
    if q.is_multiple_choice:
        ans = answer_mc(model, q, knowledge, MCConfig(method=method))
    else:
        ans = answer_free_text(model, q, knowledge)
    text = {c.label: c.text for c in q.choices}
    probs = {text[k]: round(v, 6) for k, v in ans.probabilities.items()} if text else {}
    report = {
        "llm": model.name,
        "answer": text.get(ans.prediction, ans.prediction),
        "label": ans.prediction if q.is_multiple_choice else None,
        "probabilities": probs,
        "raw": ans.raw,
        "usage": ans.usage.to_dict(),
    }
    if json_out is not None:
        write_json(report, json_out)
        return
    console.print(f"[bold]answer:[/bold] {report['answer']}")
    for name, p in sorted(probs.items(), key=lambda kv: -kv[1]):
        console.print(f"  {p:7.2%}  {name}")
    u = ans.usage
    console.print(f"usage: {u.input_tokens} input + {u.output_tokens} output tokens, {u.calls} call(s), "
                  f"{u.cached_calls} cached, {u.latency_s:.2f} s, ${u.cost:.6f}")


def _default_records(dataset: str, split: str, llm: str, method: str, json_out: Path | None) -> Path:
    if json_out is not None:
        return json_out.with_suffix(".records.jsonl")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{dataset}_{split}_{llm}_{method}")
    return cache_dir() / "runs" / f"eval_llm_{slug}.jsonl"


@eval_app.command("llm")
@friendly_errors
def eval_llm(
    dataset: Annotated[str | None, typer.Option("--dataset", help="csqa, obqa, medqa, webqsp, cwq.")
                       ] = None,
    split: Annotated[str | None, typer.Option("--split", help="e.g. ihtest, test.")] = None,
    questions_file: Annotated[Path | None, typer.Option(
        "--questions", help="Your questions (JSONL: id, text, choices?, gold?) instead of --dataset/--split.")
    ] = None,
    llm: LlmOption = DEFAULT_LLM,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N questions.")] = None,
    method: MethodOption = "score",
    concurrency: Annotated[int, typer.Option(min=1, help="Parallel calls (API backends).")] = 1,
    cache: CacheOption = False,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Per-question records (JSONL; resumes).", callback=writable)] = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Accuracy, speed and usage of an LLM alone (no KG) on a data set; resumes from --out."""
    from kgwise.datasets import load
    from kgwise.eval.llm import EvalConfig, evaluate_llm
    from kgwise.llm import get_llm

    distinct_outputs({"--out": out, "--json": json_out}, {"--questions": questions_file})
    cfg = EvalConfig(method=method, concurrency=concurrency)
    if questions_file is not None:
        if dataset is not None or split is not None:
            raise ConfigError("give --questions FILE or --dataset/--split, not both")
        from kgwise.datasets.user import read_questions

        questions = read_questions(questions_file)
        dataset, split = questions_file.stem, "file"
    elif dataset is None or split is None:
        raise ConfigError("give --dataset and --split, or --questions FILE")
    else:
        questions = load(dataset, split, data)
    if limit is not None:
        questions = questions[:limit]
    model = get_llm(llm, cache=cache)
    records = out if out is not None else _default_records(dataset, split, llm, method, json_out)
    report = {"dataset": dataset, "split": split, **evaluate_llm(model, questions, records, cfg)}
    if questions_file is not None:
        report["questions_file"] = str(questions_file)
    report["llm"] = llm
    if not report["labelled"]:
        err_console.print(f"[yellow]warning:[/yellow] {dataset}/{split} has no gold answers: "
                          "no accuracy is reported")
    elif report["labelled"] < report["n"]:
        err_console.print(f"accuracy over the {report['labelled']} of {report['n']} questions with gold "
                          "answers")
    write_json(report, json_out)
