"""``kgwise eval knowgpt``: KnowGPT's tables on a benchmark or on your questions and KG. (One KnowGPT answer
with its calibrated set is the pipeline's: a one-arm config, ``kgwise init --arm x=inject:LLM``, then
``kgwise fit`` and ``kgwise ask``; see docs/single-arm.md.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    console,
    distinct_outputs,
    err_console,
    friendly_errors,
    write_json,
)
from kgwise.errors import ConfigError
from kgwise.kg.sources import GRAPH_FILE_HELP
from kgwise.llm.local_models import DEFAULT_LLM

_LLM_HELP = ("LLM spec: smollm2-135m, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, gguf:PATH, "
             "openai:MODEL.")


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
    llm: Annotated[str, typer.Option("--llm", help=_LLM_HELP)] = DEFAULT_LLM,
    json_out: JsonOption = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Test questions per split.")] = None,
    splits: Annotated[str | None, typer.Option(
        "--splits", help="Only these test splits, comma-separated (csqa: ihdev, ihtest; obqa: test; medqa: "
        "test-half) (default: all).")] = None,
    facts_only: Annotated[bool, typer.Option(
        "--facts-only/--no-facts-only", help="Measure OBQA's 'facts only' row (the open-book facts without "
        "KG knowledge: one more LLM outcome per question).")] = True,
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
        "by 'pmi' (the sum minus the choice's context-free log-probability), or 'auto': a rule per setting, "
        "each the one that answers most bandit-training questions right: w/o KG's without knowledge, "
        "KnowGPT's with each combination's knowledge; or 'letter': every option lettered in one chat "
        "prompt, read from the reply's first-token log-probabilities (one call a question)."
    )] = "auto",
    bandit_feedback: Annotated[str | None, typer.Option(
        "--bandit-feedback", help="Train the prompt bandit on every combination's reward per training "
        "question ('full') or on the pulled one's only ('bandit', the paper; also replayed under 'full') "
        "(default: the --config's, else full).", show_default=False)] = None,
    combos: Annotated[str | None, typer.Option(
        "--combos", help="Only these (extractor+format) combinations, comma-separated, e.g. "
        "P_sub+F_t,P_sub+F_s (default: all six; without a P_RL one, P_RL is not trained).")] = None,
    evidence: Annotated[str, typer.Option(
        "--evidence", help="The knowledge a prompt renders: 'ranked' (the paths joining question concepts "
        "to a choice, best first, cut to --knowledge-tokens) or 'full' (the whole extracted subgraph, as "
        "the format selects from it).")] = "ranked",
    knowledge_tokens: Annotated[int | None, typer.Option(
        "--knowledge-tokens", min=1, help="Token budget of ranked knowledge (default: an inject arm's "
        "default knowledge_tokens).", show_default=False)] = None,
    knowledge_ratio: Annotated[float | None, typer.Option(
        "--knowledge-ratio", min=0, help="Ranked knowledge tokens per question token (default: an inject "
        "arm's, 2.0; 0: --knowledge-tokens alone).", show_default=False)] = None,
    against: Annotated[Path | None, typer.Option(
        "--against", help="Another run directory of the same data set, LLM and settings but the other "
        "--evidence (or budget): compare each combination with it, question by question (accuracy, prompt "
        "size, gold paths).", exists=True, file_okay=False)] = None,
    config: ConfigOption = None,
    data: DataOption = None,
) -> None:
    """KnowGPT's Tables 3/4 on a benchmark or on your questions and KG: w/o KG, P_sub/P_RL × F_t/F_s/F_g,
    and full KnowGPT (resumable); says first how many LLM outcomes it needs and how long they will take."""
    from kgwise.eval.knowgpt import (
        KnowGPTData,
        KnowGPTExperimentConfig,
        against_table,
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
        inputs = name = dataset
    if evidence not in ("ranked", "full"):
        raise ConfigError(f"--evidence must be ranked or full, got {evidence!r}")
    if evidence == "full" and (knowledge_tokens is not None or knowledge_ratio is not None):
        raise ConfigError("--knowledge-tokens and --knowledge-ratio budget ranked evidence; --evidence "
                          "full renders the whole subgraph")
    chosen = tuple(c.strip() for c in combos.split(",") if c.strip()) if combos is not None else None
    cfg = KnowGPTExperimentConfig(limit=limit, train_limit=train_limit, rl_iterations=rl_iterations,
                           rl_time_limit_s=rl_minutes * 60, scoring=scoring, facts_only=facts_only,
                           splits=tuple(x.strip() for x in (splits or "").split(",") if x.strip()) or None,
                           agent=configured("path_agent", config, max_steps=rl_max_steps),
                           bandit=configured("prompt_bandit", config, feedback=bandit_feedback))
    if chosen is not None:
        cfg = replace(cfg, combos=chosen)
    if evidence == "full":
        cfg = replace(cfg, knowledge_tokens=None)
    elif knowledge_tokens is not None:
        cfg = replace(cfg, knowledge_tokens=knowledge_tokens)
    if knowledge_ratio is not None:
        cfg = replace(cfg, knowledge_ratio=knowledge_ratio or None)
    run_dir = out_dir or Path("runs") / "knowgpt" / f"{name}-{llm.replace(':', '_').replace('/', '_')}"
    report = run_experiment(inputs, llm, run_dir, cfg, data, log=lambda m: err_console.print(m, markup=False),
                            against=against)
    write_json(report, json_out)
    table = markdown_table({name: report})
    if against is not None:
        table += "\n\n" + against_table(report)
    console.print(table, markup=False)
    if json_out is not None:
        json_out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
