"""Options and helpers shared by the CLI modules."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from kgwise.errors import KgwiseError

console = Console()
err_console = Console(stderr=True)

DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="Data directory (default: $KGWISE_DATA).", show_default=False),
]
JsonOption = Annotated[Path | None, typer.Option("--json", help="Also write the report to this JSON file.")]
PolicyOption = Annotated[Path | None, typer.Option("--policy", help="Trained P_RL policy (.pt).")]
BanditOption = Annotated[Path | None, typer.Option("--bandit", help="Trained prompt bandit (.npz).")]
ScoringOption = Annotated[str | None, typer.Option(
    "--scoring", help="Rank choices by the 'sum' or per-token 'mean' of log-probabilities, or by 'pmi' "
    "(the sum minus the choice's context-free log-probability); default: the rule the --bandit was "
    "trained with, else sum.")]

P = ParamSpec("P")
R = TypeVar("R")


def friendly_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn kgwise's own errors into one red line and exit code 2, instead of a traceback."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KgwiseError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from exc

    return wrapper


def write_json(report: Any, path: Path | None) -> None:
    """Print ``report`` as JSON and, when ``path`` is given, write it there too."""
    text = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    console.print_json(text)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        err_console.print(f"report written to {path}")
