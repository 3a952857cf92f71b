"""``kgwise route init/status/select/feedback/cancel/repair`` (a router state file for ``kgwise serve
--router``, routing from the shell, and setting a broken state file right)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import (
    ConfigOption,
    JsonOption,
    distinct_outputs,
    err_console,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.errors import ConfigError
from kgwise.files import write_text_atomic

if TYPE_CHECKING:
    from kgwise.route.service import RoutingService

route_app = typer.Typer(help="Coke routers: made here, served by `kgwise serve --router` or used from the "
                        "shell.", no_args_is_help=True)
app.add_typer(route_app, name="route")


@route_app.command("init")
@friendly_errors
def route_init(
    arm: Annotated[list[str], typer.Option("--arm", help="NAME:CLUSTER[:REPORTED_ACCURACY], CLUSTER = KGM "
                                           "or LLM; repeat per arm, in the order of the costs sent later.")],
    budget: Annotated[float, typer.Option(help="Total spending allowed (same unit as the costs).")],
    out: Annotated[Path, typer.Option(help="Router state file to write (JSON).", callback=writable)],
    lam: Annotated[float | None, typer.Option(
        "--lambda", help="λ, the weight of the cost regret (Eq. 14) (default: the --config's, else 1).",
        show_default=False)] = None,
    horizon: Annotated[int | None, typer.Option(
        min=1, help="Pace the budget over this many questions.")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the Thompson and tie-breaking draws.")] = 0,
    warm_start: Annotated[Path | None, typer.Option(
        exists=True, dir_okay=False, help='Graded log to learn from first (JSONL: the graded log of '
        '`eval route --log`, {"id", "text", "arms": {ARM: {answer, correct, cost}}}, or {"question": TEXT, '
        '"rewards": {ARM: REWARD, …}} per line; e.g. a dev set run on every arm); nothing is spent.')
    ] = None,
    config: ConfigOption = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace an existing router state file (its learning and spending are lost); "
        "refused while a server owns it.")
    ] = False,
    max_cost: Annotated[list[str] | None, typer.Option(
        "--max-cost", help="ARM=COST: the most a decision of ARM may hold (the arm's price for the largest "
        "question); clients' cost bounds are capped by it and may be left out.")] = None,
    max_tokens: MaxTokensOption = None,
) -> None:
    """Write a Coke router (all-MiniLM-L6-v2 question context) for `kgwise serve --router`; its
    hyper-parameters are the coke table of --config (δ, ridge, priors, …) and --lambda. It starts from
    the priors, or from what --warm-start's graded questions teach."""
    from kgwise.embed import MiniLM
    from kgwise.route.arms import ArmSpec
    from kgwise.route.coke import CokeRouter
    from kgwise.route.service import owned_state
    from kgwise.settings import configured

    if not (budget > 0):
        raise ConfigError(f"--budget must be > 0, got {budget}")
    distinct_outputs({"--out": out}, {"--config": config})
    if out.exists() and not force:
        raise ConfigError(f"{out} exists: it may hold a router in use (its learning and spending would be "
                          "lost); pass --force to replace it")
    arms: list[ArmSpec] = []
    for spec in arm:
        # read from the right: a name may hold ':' (openai:gpt-4o, gguf:/models/m.gguf)
        parts = spec.rsplit(":", 2)
        if len(parts) == 3 and parts[1] not in ("KGM", "LLM"):
            parts = [f"{parts[0]}:{parts[1]}", parts[2]]
        if len(parts) < 2 or not parts[0]:
            raise ConfigError(f"--arm {spec!r}: expected NAME:CLUSTER[:REPORTED_ACCURACY]")
        try:
            reported = float(parts[2]) if len(parts) == 3 else None
        except ValueError as exc:
            raise ConfigError(f"--arm {spec!r}: reported accuracy {parts[2]!r} is not a number") from exc
        arms.append(ArmSpec(parts[0], parts[1], reported))  # type: ignore[arg-type]  # checked by ArmSpec
    encoder = MiniLM()
    router = CokeRouter(arms, encoder.dim, budget=budget, config=configured("coke", config, lam=lam),
                        seed=seed, horizon=horizon)
    learnt = ""
    if warm_start is not None:
        from kgwise.files import read_jsonl
        from kgwise.route.table import graded_rewards, read_graded_log

        first = next(iter(read_jsonl(warm_start, "graded log")), (0, {}))[1]
        if "arms" in first:  # the documented graded log (kgwise.datasets.user)
            from kgwise.datasets.user import read_graded_log as read_log

            texts, rewards = graded_rewards(read_log(warm_start), router.names, warm_start)
        else:
            texts, rewards = read_graded_log(warm_start, router.names)
        n = router.warm_start(encoder.encode(texts), rewards)
        learnt = f", warm-started from {n} outcomes on {len(texts)} questions"
    bounds = service_bounds(max_cost, max_tokens, router.names)
    state = {**router.state_dict(), "pending": [], "max_costs": bounds}
    with owned_state(out):  # a server that owns the file keeps it
        write_text_atomic(out, json.dumps(state, allow_nan=False))
    err_console.print(f"router with {len(arms)} arms, budget {budget:g}{learnt}, written to {out}")




MaxTokensOption = Annotated[str | None, typer.Option(
    "--max-tokens", help="IN,OUT: bound every arm named like a model of the price table (bundled, or "
    "$KGWISE_PRICES) by its price for a call of IN prompt and OUT completion tokens; --max-cost names "
    "the others.", show_default=False)]


def service_bounds(max_cost: list[str] | None, max_tokens: str | None, names: list[str],
                   option: str = "--max-cost") -> list[float] | None:
    """The service's per-arm cost bounds from ``--max-cost ARM=COST`` and ``--max-tokens IN,OUT``
    (prices), or ``None`` when neither is given; every arm must get one."""
    from kgwise.route.bounds import cost_bounds, parse_arm_costs, parse_token_limits

    if not max_cost and max_tokens is None:
        return None
    limits = parse_token_limits(max_tokens) if max_tokens is not None else None
    return cost_bounds(names, parse_arm_costs(max_cost or [], names, option), limits, option=option)


RouterArgument = Annotated[Path, typer.Argument(help="Router state file (`kgwise route init`).",
                                                exists=True, dir_okay=False)]


@route_app.command("status")
@friendly_errors
def route_status(router: RouterArgument, json_out: JsonOption = None) -> None:
    """Budget, spending, pulls, decisions awaiting feedback and each cluster's estimated accuracy of a
    router (it may be in use by `kgwise serve`)."""
    from kgwise.route.service import read_status

    distinct_outputs({"--json": json_out}, {"ROUTER": router})
    write_json(read_status(router), json_out)


def _service(router: Path, allow_overrun: bool = False) -> RoutingService:
    """The router's service, embedding questions with all-MiniLM-L6-v2 (loaded on first use)."""
    from kgwise.embed import MiniLM
    from kgwise.route.service import RoutingService

    encoder = MiniLM()
    return RoutingService(router, lambda text: encoder.encode([text])[0], encoder.dim,
                          allow_overrun=allow_overrun)


@route_app.command("select")
@friendly_errors
def route_select(
    router: RouterArgument,
    question: Annotated[str, typer.Argument(help="The question to route.")],
    cost: Annotated[list[float] | None, typer.Option(
        "--cost", help="Per arm, in the router's order, an upper bound on what answering would cost; "
        "repeat per arm (capped by the router's own bounds; default: those).")] = None,
    json_out: JsonOption = None,
) -> None:
    """Pick the arm for one question (Coke, Eq. 2–14) and hold its cost bound until `kgwise route
    feedback` reports the outcome; prints the decision id to report it with."""
    distinct_outputs({"--json": json_out}, {"ROUTER": router})
    with _service(router) as service:
        out = service.route(question, cost or None)
    write_json(out, json_out)
    if out["arm"] is None:
        raise typer.Exit(1)


@route_app.command("feedback")
@friendly_errors
def route_feedback(
    router: RouterArgument,
    decision: Annotated[str, typer.Argument(help="The decision id `kgwise route select` printed.")],
    reward: Annotated[float, typer.Option(min=0.0, max=1.0, help="1 = right, 0 = wrong, or a grade "
                                          "in between.")],
    cost: Annotated[float, typer.Option(min=0.0, help="What answering really cost.")],
    observed: Annotated[list[str] | None, typer.Option(
        help="ARM=REWARD of another arm that answered the same question at no cost (a free KG model "
             "run on every question); repeatable.")] = None,
    allow_overrun: Annotated[bool, typer.Option(
        "--allow-overrun", help="Record a cost above the decision's bound (the budget may then be "
        "exceeded) instead of refusing it.")] = False,
    json_out: JsonOption = None,
) -> None:
    """Report a decision's outcome: the router learns from it and the cost is settled against the
    budget (a cost above the decision's bound is refused unless --allow-overrun)."""
    distinct_outputs({"--json": json_out}, {"ROUTER": router})
    seen = _observed(observed or [])
    with _service(router, allow_overrun) as service:
        out = service.feedback(decision, reward, cost, seen)
    write_json(out, json_out)


@route_app.command("cancel")
@friendly_errors
def route_cancel(
    router: RouterArgument,
    decision: Annotated[str, typer.Argument(help="The decision id `kgwise route select` printed.")],
    json_out: JsonOption = None,
) -> None:
    """Call off a decision whose arm will not be run: its cost bound returns to the budget."""
    distinct_outputs({"--json": json_out}, {"ROUTER": router})
    with _service(router) as service:
        out = service.cancel(decision)
    write_json(out, json_out)


@route_app.command("repair")
@friendly_errors
def route_repair(
    router: RouterArgument,
    spent: Annotated[float | None, typer.Option(
        help="Set the spending to this (required when the file's is infinite, NaN or negative); "
        "`--spent 0` resets it.", show_default=False)] = None,
    drop_pending: Annotated[bool, typer.Option(
        "--drop-pending", help="End every waiting decision and release its cost bound.")] = False,
    max_cost: Annotated[list[str] | None, typer.Option(
        "--max-cost", help="ARM=COST: set the router's per-arm cost bounds (with --max-tokens, the "
        "arms the price table lists may be left out).")] = None,
    max_tokens: MaxTokensOption = None,
) -> None:
    """Set a router state file right (refused while a server owns it): the spending (--spent), per-arm
    money that is not a finite number ≥ 0 (to 0), waiting decisions that do not match the held bounds
    (ended); the old file is kept beside it (.bak-TIME)."""
    from kgwise.files import read_json
    from kgwise.route.service import repair_state

    names = read_json(router).get("names", []) if max_cost or max_tokens else []
    bounds = service_bounds(max_cost, max_tokens, names)
    report = repair_state(router, spent, drop_pending, bounds)
    write_json(asdict(report), None)
    if not report.changes:
        err_console.print(f"{router}: nothing to repair")


def _observed(specs: list[str]) -> dict[str, float]:
    """``--observed ARM=REWARD`` options as a mapping (the arm name may hold ``=``: the last one splits)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        try:
            out[name] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise ConfigError(f"--observed {spec!r}: expected ARM=REWARD, e.g. ReaRev=1")
    return out
