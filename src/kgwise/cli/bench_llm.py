"""``kgwise bench llm``: seconds per multiple-choice question on each local model (the cost ladder; see
:mod:`kgwise.eval.bench.llm`)."""

from __future__ import annotations

from typing import Annotated

import typer

from kgwise.cli.apps import bench_app
from kgwise.cli.common import DataOption, JsonOption, console, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError

_LADDER = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


@bench_app.command("llm")
@friendly_errors
def bench_llm(
    llm: Annotated[list[str] | None, typer.Option(
        "--llm", help="LLM spec to time; repeatable (default: the four shipped local models).")] = None,
    dataset: Annotated[str, typer.Option(help="Multiple-choice data set (csqa, obqa, medqa).")] = "obqa",
    split: Annotated[str, typer.Option(help="Its split.")] = "dev",
    limit: Annotated[int, typer.Option(min=1, help="Questions per model.")] = 20,
    scoring: Annotated[str | None, typer.Option(
        help="One scoring rule for every model (sum, mean, pmi; default: each model's own).")] = None,
    api_model: Annotated[str | None, typer.Option(
        help="Also price each question's tokens at this price-table model.")] = "llama-2-7b",
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Time the same questions on each local LLM (its load, then seconds per question under its own
    scoring rule) and print the ladder, cheapest first, with the machine's load average."""
    from kgwise.datasets import load
    from kgwise.eval.bench.llm import run_llm_benchmark
    from kgwise.llm.base import scoring_rule

    rule = scoring_rule(scoring) if scoring is not None else None
    questions = load(dataset, split, data_dir(data))[:limit]
    if not questions:
        raise ConfigError(f"{dataset}/{split} has no questions")
    report = run_llm_benchmark(llm or _LADDER, questions, rule=rule, api_model=api_model,
                               progress=lambda m: err_console.print(f"[dim]{m}[/dim]"))
    report |= {"dataset": dataset, "split": split}
    by_name = {m["llm"]: m for m in report["models"]}
    console.print(f"{dataset}/{split}, {len(questions)} questions; {report['cpus']} CPUs, load average "
                  f"{report['load_average'][0]:.2f}")
    console.print("| model | rule | s/question (median, p90) | load s | accuracy | tokens/question |",
                  soft_wrap=True)
    console.print("|---|---|---|---|---|---|")
    for name in report["ladder"]:
        m = by_name[name]
        s = m["seconds_per_question"]
        console.print(f"| {name} | {m['rule']} | {s['median']:.2f}, {s['p90']:.2f} | {m['load_s']:.1f} | "
                      f"{m['accuracy']:.3f} | {m['input_tokens_per_question']:.0f} |",
                      markup=False, soft_wrap=True)
    write_json(report, json_out)
