"""``kgwise answer`` (KnowGPT knowledge injection for one question) and ``kgwise eval knowgpt``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app, eval_app
from kgwise.cli.common import DataOption, JsonOption, console, friendly_errors, write_json
from kgwise.errors import ConfigError

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
    kg: Annotated[Path, typer.Option("--kg", help="A graph file written by `kgwise kg build` (.npz).")],
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = "smollm2-135m",
    policy: Annotated[Path | None, typer.Option("--policy", help="Trained P_RL policy (.pt).")] = None,
    bandit: Annotated[Path | None, typer.Option("--bandit", help="Trained prompt bandit (.npz).")] = None,
    combo: Annotated[str | None, typer.Option(
        "--combo", help="Force a combination, e.g. P_sub+F_s (default: the bandit's pick, else P_sub+F_s)."
    )] = None,
) -> None:
    """Answer one multiple-choice QUESTION with knowledge from a KG injected into the LLM's prompt."""
    from kgwise.inject.build import DEFAULT_COMBO, build_injector, make_question

    q = make_question(question, _parse_choices(choices), "cli")
    injector = build_injector(kg, llm, policy, bandit)
    if combo is None and injector.bandit is None:
        combo = DEFAULT_COMBO
    result = injector.inject(q, combo)
    a = result.answer
    chosen = next(c.text for c in q.choices if c.label == a.prediction)
    console.print(f"[bold]answer:[/bold] {a.prediction}) {chosen}")
    for c in q.choices:
        console.print(f"  {c.label}) {c.text}: {a.probabilities.get(c.label, 0.0):.3f}")
    console.print(f"[bold]combination:[/bold] {a.combo}")
    console.print("[bold]knowledge:[/bold]")
    console.print(a.knowledge or "(none found)", markup=False)
    u = a.usage
    console.print(f"[bold]usage:[/bold] {u.calls} LLM calls ({u.cached_calls} cached), "
                  f"{u.input_tokens} input + {u.output_tokens} output tokens, {u.latency_s:.2f} s LLM time, "
                  f"cost {u.cost:.6f}; "
                  f"grounding+extraction+rendering {result.prep_ms:.1f} ms")


@eval_app.command("knowgpt")
@friendly_errors
def eval_knowgpt(
    dataset: Annotated[str, typer.Option("--dataset", help="csqa, obqa or medqa.")],
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = "smollm2-135m",
    json_out: JsonOption = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Test questions per split.")] = None,
    train_limit: Annotated[int, typer.Option("--train-limit", help="Bandit training questions.")] = 200,
    rl_iterations: Annotated[int, typer.Option("--rl-iterations", help="P_RL gradient updates.")] = 300,
    rl_minutes: Annotated[float, typer.Option("--rl-minutes", help="Time limit of P_RL training.")] = 25.0,
    out_dir: Annotated[Path | None, typer.Option(
        "--out-dir", help="Run directory (outcomes, policy, bandit; reused to resume)."
    )] = None,
    scoring: Annotated[str, typer.Option(
        "--scoring", help="Rank choices by the sum ('sum') or per-token mean ('mean') of log-probabilities."
    )] = "sum",
    data: DataOption = None,
) -> None:
    """KnowGPT's Tables 3/4 on our data: w/o KG, P_sub/P_RL × F_t/F_s/F_g, and full KnowGPT (resumable)."""
    from kgwise.inject.experiment import DATASETS, ExperimentConfig, markdown_table, run_experiment

    if dataset not in DATASETS:
        raise ConfigError(f"unknown data set {dataset!r}; choose one of {', '.join(DATASETS)}")
    if scoring not in ("sum", "mean"):
        raise ConfigError(f"--scoring must be 'sum' or 'mean', got {scoring!r}")
    cfg = ExperimentConfig(limit=limit, train_limit=train_limit, rl_iterations=rl_iterations,
                           rl_time_limit_s=rl_minutes * 60, normalised=scoring == "mean")
    run_dir = out_dir or Path("runs") / "knowgpt" / f"{dataset}-{llm.replace(':', '_').replace('/', '_')}"
    report = run_experiment(dataset, llm, run_dir, cfg, data, log=lambda m: console.print(m, markup=False))
    write_json(report, json_out)
    table = markdown_table({dataset: report})
    console.print(table, markup=False)
    if json_out is not None:
        json_out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
