"""``kgwise eval config show``: the hyper-parameter file of the defaults, to edit and pass as ``--config``."""

from __future__ import annotations

from typing import Annotated

import typer

from kgwise.cli.apps import eval_app
from kgwise.cli.common import friendly_errors

config_app = typer.Typer(help="Hyper-parameter files (TOML) for the commands that take --config.",
                         no_args_is_help=True)
eval_app.add_typer(config_app, name="config")


@config_app.command("show")
@friendly_errors
def show(
    tables: Annotated[list[str] | None, typer.Argument(
        help="Tables to print (default: all): coke, path_agent, prompt_bandit, kgm_model, kgm_train, uag.",
        show_default=False)] = None,
) -> None:
    """Print the defaults the commands start from as a TOML file (the papers', except P_RL and the prompt
    bandit of `eval knowgpt`, and the evaluator scores of `eval uag`); edit it and pass it with
    --config (missing keys keep their default; options given on the command line win over the file)."""
    from kgwise.settings import defaults_toml, section_class

    for name in tables or []:
        section_class(name)  # names an unknown table before printing anything
    typer.echo(defaults_toml(tables or None), nl=False)
