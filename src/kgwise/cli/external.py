"""``kgwise route`` and ``kgwise settle``: the pipeline's external routing from the shell, each a thin call of
:meth:`kgwise.app.Pipeline.route`, :meth:`~kgwise.app.Pipeline.settle` or
:meth:`~kgwise.app.Pipeline.cancel` (:mod:`kgwise.app.external`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import JsonOption, console, friendly_errors, write_json
from kgwise.cli.pipeline import PipelineConfigOption, StateOption
from kgwise.errors import ConfigError

__all__ = ["route", "settle"]


def _pairs(specs: list[str], option: str) -> dict[str, float]:
    """``ARM=NUMBER`` options as a mapping (the arm name may hold ``=``: the last one splits)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not name or not math.isfinite(number):
            raise ConfigError(f"{option} {spec!r}: expected ARM=NUMBER, e.g. gpt-4o=0.01")
        out[name] = number
    return out


@app.command("route")
@friendly_errors
def route(
    question: Annotated[str, typer.Argument(help="The question your own model will answer.")],
    cost: Annotated[list[str] | None, typer.Option(
        "--cost", help="ARM=COST: a bound below the external arm's price for this question; repeatable.")
    ] = None,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Pick the external arm (kind = "external": a model you run) for a question and hold its cost bound
    until `kgwise settle` reports the outcome; prints the decision id."""
    from kgwise.app import Pipeline

    costs = _pairs(cost or [], "--cost") or None
    with Pipeline.from_config(config, state) as pipe:
        decision = pipe.route(question, costs)
    if json_out is not None:
        write_json(decision.to_dict(), json_out)
        return
    console.print(f"arm: {decision.arm}   bound: {decision.bound:.6g} {decision.unit}   remaining budget: "
                  f"{decision.remaining_budget:.6g}")
    console.print(f"decision: {decision.decision}  (run the arm, then `kgwise settle {decision.decision} "
                  "--correct|--wrong --cost C`, or --cancel)")


@app.command("settle")
@friendly_errors
def settle(
    decision: Annotated[str, typer.Argument(help="The decision id `kgwise route` printed.")],
    correct: Annotated[bool | None, typer.Option("--correct/--wrong", help="Was the arm's answer right?",
                                                  show_default=False)] = None,
    grade: Annotated[float | None, typer.Option(
        "--grade", min=0.0, max=1.0, help="A grade in [0, 1] instead of --correct/--wrong.")] = None,
    cost: Annotated[float | None, typer.Option(
        "--cost", min=0.0, help="What the call really cost (at most the decision's bound).")] = None,
    observed: Annotated[list[str] | None, typer.Option(
        "--observed", help="ARM=GRADE of another external arm you ran on the same question; repeatable.")
    ] = None,
    cancel: Annotated[bool, typer.Option(
        "--cancel", help="The arm was not run: call the decision off (its bound returns to the budget).")
    ] = False,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Report an external decision's outcome and cost (the router learns, the cost is paid), once; or
    --cancel it."""
    from kgwise.app import Pipeline

    if cancel and (correct is not None or grade is not None or cost is not None or observed):
        raise ConfigError("--cancel takes no outcome (--correct/--wrong, --grade, --cost, --observed)")
    if not cancel and ((correct is None) == (grade is None) or cost is None):
        raise ConfigError("give --correct, --wrong or --grade G, and --cost C (or --cancel)")
    seen = _pairs(observed or [], "--observed")
    with Pipeline.from_config(config, state, models=False) as pipe:
        if cancel:
            out = pipe.cancel(decision)
        else:
            assert cost is not None
            reward = grade if grade is not None else float(bool(correct))
            out = pipe.settle(decision, reward, cost, seen)
    if json_out is not None:
        write_json(out.to_dict(), json_out)
        return
    console.print(f"decision {out.decision}: arm {out.arm} {out.outcome}; spent {out.spent:.6g}, remaining "
                  f"{out.remaining_budget:.6g}")
