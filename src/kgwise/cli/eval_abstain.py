"""``kgwise eval abstain``: abstention with a guarantee on recorded answers, the arm's own confidence,
agreement first and the pipeline's choice, in the same splits: parse → :mod:`kgwise.eval.abstain` →
print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import DataOption, JsonOption, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError


@eval_app.command("abstain")
@friendly_errors
def eval_abstain(
    dataset: Annotated[str, typer.Option(
        help="Recorded answers: webqsp (the two ReaRev GNNs, each the other's witness).")] = "webqsp",
    log: Annotated[Path | None, typer.Option(
        "--log", exists=True, dir_okay=False,
        help="Your graded log instead (JSONL; an arm's first signal is its top choice probability, its "
             "witnesses are the log's free arms).")] = None,
    arm: Annotated[list[str] | None, typer.Option(help="With --log: only these arms (repeat).")] = None,
    alphas: Annotated[str, typer.Option(help="α levels, comma-separated.")] = "0.1,0.2,0.3",
    delta: Annotated[float, typer.Option(help="δ: the probability the certified rule misses.")] = 0.05,
    splits: Annotated[int, typer.Option(min=1, help="Random shuffles (target: ≥ 20).")] = 40,
    tune: Annotated[int, typer.Option(min=1, help="Tuning questions per split (the rule's grid and "
                                      "test order).")] = 300,
    calibration: Annotated[int, typer.Option(min=1, help="Calibration questions per split.")] = 300,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Abstention's share answered and accuracy among answered, per arm and α: the arm's own confidence,
    agreement first, and the pipeline's per-split choice between them, over random tuning / calibration /
    test splits."""
    from kgwise.eval.abstain import AbstainEvalConfig, evaluate, graded_log_arms, rearev_logs

    try:
        levels = tuple(float(x) for x in alphas.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--alphas must be numbers separated by commas, got {alphas!r}") from None
    cfg = AbstainEvalConfig(levels, delta, splits, tune, calibration, seed)
    if log is not None:
        logs = graded_log_arms(log, arm)
    elif dataset == "webqsp":
        logs = rearev_logs(data_dir(data))
    else:
        raise ConfigError(f"--dataset must be webqsp (or give --log), got {dataset!r}")
    write_json(evaluate(logs, cfg, progress=err_console.print) | {"source": str(log or dataset)}, json_out)
