"""Options and helpers shared by the CLI modules."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from kgwise.errors import ConfigError, KgwiseError
from kgwise.files import distinct_outputs as distinct_outputs  # the rule lives in kgwise.files
from kgwise.files import write_text_atomic


def _console(stderr: bool = False) -> Console:
    """A rich console that never turns ``:name:`` into an emoji (``file:100:`` stays text) and, when its
    stream is not a terminal, never wraps or cuts: a pipe gets tables as wide as their content."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty())
    return Console(stderr=stderr, emoji=False, width=PIPED_WIDTH if piped else None)


PIPED_WIDTH = 1000
"""Columns of a console whose stream is a pipe or a file (a terminal's own width is used otherwise)."""

console = _console()
err_console = _console(stderr=True)


def say(message: str) -> None:
    """Print the app's progress text on stderr as it is (``[router]`` and the like are not markup)."""
    err_console.print(message, markup=False)

DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="Data directory (default: $KGWISE_DATA).", show_default=False),
]

GradedLogOption = Annotated[Path | None, typer.Option(
    "--log", exists=True, dir_okay=False,
    help="Your graded log (JSONL: id, text, arms: {ARM: {answer, correct, cost | usage, signals?}}) "
         "instead of --dataset; with --arm for each arm to replay.")]
LogArmsOption = Annotated[list[str] | None, typer.Option(
    "--arm", help="With --log: NAME:CLUSTER:REPORTED_ACCURACY (CLUSTER = KGM or LLM) of an arm of the "
                  "log; repeat per arm.")]


def writable(path: Path | None) -> Path | None:
    """Option callback: refuse an output path that cannot be written (a directory, an uncreatable or
    read-only folder) when the command line is read, before any work is done."""
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory, not a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(f"cannot create the folder {path.parent}: {exc.strerror}") from exc
    if not os.access(path.parent, os.W_OK):
        raise typer.BadParameter(f"the folder {path.parent} is not writable")
    return path


def refuse_overwrite(outputs: Mapping[str, Path | None], inputs: Mapping[str, Any],
                     folders: Mapping[str, Path] | None = None) -> None:
    """Before any work: refuse an output that is one of the command's inputs or another output
    (:func:`kgwise.files.distinct_outputs`), or lies inside a folder the command reads as a whole
    (``folders``: a state directory — ``--json state.json`` would destroy the state). ``ConfigError``
    naming both options."""
    distinct_outputs(outputs, inputs)
    for option, path in outputs.items():
        if path is None:
            continue
        for name, folder in (folders or {}).items():
            if path.resolve().is_relative_to(folder.resolve()):
                raise ConfigError(f"{option} {path} is inside {name} {folder}: writing it would overwrite "
                                  "what this command reads there; choose a file outside it")


_T = TypeVar("_T")


def comma_list(text: str, option: str, of: Callable[[str], _T]) -> tuple[_T, ...]:
    """The comma-separated values of ``option``'s ``text``, each converted by ``of`` (``ConfigError`` naming
    the option for a value ``of`` refuses, or for none)."""
    try:
        values = tuple(of(x.strip()) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{option}: expected values separated by commas, got {text!r}") from None
    if not values:
        raise ConfigError(f"{option}: no values given")
    return values


JsonOption = Annotated[Path | None, typer.Option("--json", help="Also write the report to this JSON file.",
                                                 callback=writable)]
ConfigOption = Annotated[Path | None, typer.Option(
    "--config", help="Hyper-parameter file (TOML, see `kgwise eval config show`); options given here win "
    "over it.",
    show_default=False)]

P = ParamSpec("P")
R = TypeVar("R")


def friendly_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn kgwise's own errors and the system's file errors into one red line and exit code 2, instead
    of a traceback."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except KgwiseError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from exc
        except OSError as exc:  # a file that cannot be read or written, a refused connection
            where = f"{exc.filename}: " if exc.filename else ""
            err_console.print(f"[red]error:[/red] {escape(where + (exc.strerror or str(exc)))}")
            raise typer.Exit(2) from exc

    return wrapper


def save_json(report: Any, path: Path | None) -> None:
    """Write ``report`` as JSON to ``path`` (nothing when None), leaving stdout to what a person reads."""
    if path is None:
        return
    write_text_atomic(path, json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    err_console.print(f"report written to {path}", markup=False)


def write_json(report: Any, path: Path | None) -> None:
    """Print ``report`` as JSON and, when ``path`` is given, write it there too."""
    text = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    console.print_json(text)
    if path is not None:
        write_text_atomic(path, text + "\n")
        err_console.print(f"report written to {path}")
