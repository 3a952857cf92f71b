"""The command groups. Each ``kgwise.cli.<topic>`` module adds its commands to these."""

from __future__ import annotations

from typing import Annotated

import typer

from kgwise.progress import quiet_libraries

app = typer.Typer(
    name="kgwise",
    help="Knowledge-graph-grounded question answering with LLMs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


@app.callback()
def _options(verbose: Annotated[bool, typer.Option(
        "--verbose", help="Also show third-party libraries' progress bars and log lines.")] = False) -> None:
    """Knowledge-graph-grounded question answering with LLMs."""
    if not verbose:
        quiet_libraries()

data_app = typer.Typer(help="Benchmark data sets.", no_args_is_help=True)
kg_app = typer.Typer(help="Build, inspect and query knowledge graphs.", no_args_is_help=True)
bench_app = typer.Typer(help="Speed benchmarks (print and save JSON).", no_args_is_help=True)
eval_app = typer.Typer(help="Quality evaluations that reproduce the papers' tables (print and save JSON).",
                       no_args_is_help=True)

app.add_typer(kg_app, name="kg")
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")
eval_app.add_typer(data_app, name="data")
