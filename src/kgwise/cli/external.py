"""``kgwise route select|settle|cancel``: the pipeline's external routing from the shell, each a thin call of
:meth:`kgwise.app.Pipeline.route`, :meth:`~kgwise.app.Pipeline.settle` or
:meth:`~kgwise.app.Pipeline.cancel` (:mod:`kgwise.app.external`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import JsonOption, console, distinct_outputs, friendly_errors, write_json
from kgwise.cli.pipeline import PipelineConfigOption, StateOption
from kgwise.errors import ConfigError

if TYPE_CHECKING:
    from kgwise.app.external import Settlement

__all__ = ["cancel", "route_app", "select", "settle"]

route_app = typer.Typer(help="Route among external arms (kind = \"external\": models you run) within the "
                        "pipeline's budget: select, then settle or cancel.", no_args_is_help=True)
app.add_typer(route_app, name="route")


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


@route_app.command("select")
@friendly_errors
def select(
    question: Annotated[str, typer.Argument(help="The question your own model will answer.")],
    cost: Annotated[list[str] | None, typer.Option(
        "--cost", help="ARM=COST: a bound below the external arm's price for this question; repeatable.")
    ] = None,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Pick the external arm for a question and hold its cost bound until `kgwise route settle` reports
    the outcome (or `kgwise route cancel`); prints the decision id."""
    from kgwise.app import Pipeline

    costs = _pairs(cost or [], "--cost") or None
    distinct_outputs({"--json": json_out}, {"--config": config})
    with Pipeline.from_config(config, state) as pipe:
        decision = pipe.route(question, costs)
    if json_out is not None:
        write_json(decision.to_dict(), json_out)
        return
    console.print(f"arm: {decision.arm}   bound: {decision.bound:.6g} {decision.unit}   remaining budget: "
                  f"{decision.remaining_budget:.6g}")
    console.print(f"decision: {decision.decision}  (run the arm, then `kgwise route settle "
                  f"{decision.decision} --correct|--wrong --cost C`, or `kgwise route cancel`)")


DecisionArgument = Annotated[str, typer.Argument(help="The decision id `kgwise route select` printed.")]


@route_app.command("settle")
@friendly_errors
def settle(
    decision: DecisionArgument,
    correct: Annotated[bool | None, typer.Option("--correct/--wrong", help="Was the arm's answer right?",
                                                  show_default=False)] = None,
    grade: Annotated[float | None, typer.Option(
        "--grade", min=0.0, max=1.0, help="A grade in [0, 1] instead of --correct/--wrong.")] = None,
    cost: Annotated[float | None, typer.Option(
        "--cost", min=0.0, help="What the call really cost (at most the decision's bound).")] = None,
    observed: Annotated[list[str] | None, typer.Option(
        "--observed", help="ARM=GRADE of another external arm you ran on the same question; repeatable.")
    ] = None,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Report an external decision's outcome and what it cost, once: the cost is paid (at most the
    decision's bound) and the router learns."""
    from kgwise.app import Pipeline

    if (correct is None) == (grade is None) or cost is None:
        raise ConfigError("give --correct, --wrong or --grade G, and --cost C")
    seen = _pairs(observed or [], "--observed")
    reward = grade if grade is not None else float(bool(correct))
    distinct_outputs({"--json": json_out}, {"--config": config})
    with Pipeline.from_config(config, state, models=False) as pipe:
        out = pipe.settle(decision, reward, cost, seen)
    _print(out, json_out)


@route_app.command("cancel")
@friendly_errors
def cancel(
    decision: DecisionArgument,
    config: PipelineConfigOption = Path("kgwise.toml"),
    state: StateOption = None,
    json_out: JsonOption = None,
) -> None:
    """Call off an external decision whose arm was not run: its cost bound returns to the budget."""
    from kgwise.app import Pipeline

    distinct_outputs({"--json": json_out}, {"--config": config})
    with Pipeline.from_config(config, state, models=False) as pipe:
        out = pipe.cancel(decision)
    _print(out, json_out)


def _print(out: Settlement, json_out: Path | None) -> None:
    if json_out is not None:
        write_json(out.to_dict(), json_out)
        return
    console.print(f"decision {out.decision}: arm {out.arm} {out.outcome}; spent {out.spent:.6g}, remaining "
                  f"{out.remaining_budget:.6g}")
