"""``kgwise --help``: the pipeline's commands first, then its other groups, then the research and KG tools,
at most eleven in all; a command's summary reads as one paragraph (no docstring line breaks)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from kgwise.cli.main import PIPELINE_TOOLS, PRODUCT, app


def _listed(text: str) -> list[str]:
    """The command names of a ``--help`` screen, in order (the first word of each row of a panel)."""
    return re.findall(r"^│ (\w[\w-]*) ", text, flags=re.MULTILINE)


def test_help_lists_the_product_first_and_at_most_eleven_commands() -> None:
    res = CliRunner().invoke(app, ["--help"], terminal_width=100)
    assert res.exit_code == 0, res.output
    names = [n for n in _listed(res.output) if n not in ("verbose", "install", "show", "help")]
    assert names[:len(PRODUCT)] == list(PRODUCT)
    assert names[len(PRODUCT):len(PRODUCT) + len(PIPELINE_TOOLS)] == list(PIPELINE_TOOLS)
    assert set(names[len(PRODUCT) + len(PIPELINE_TOOLS):]) == {"kg", "bench", "eval"}
    assert len(names) <= 11
    wide = CliRunner(env={"COLUMNS": "300"}).invoke(app, ["--help"]).output
    # init's summary is one line on a wide screen (its docstring breaks after "models known,")
    assert "(files exist, models known, α in (0, 1)) before it is written." in wide


def test_moved_commands_answer_under_their_groups() -> None:
    runner = CliRunner()
    for args in (["state", "repair", "--help"], ["eval", "data", "stats", "--help"],
                 ["eval", "config", "show", "--help"]):
        assert runner.invoke(app, args).exit_code == 0, args
    for old in (["repair", "--help"], ["data", "stats"], ["config", "show"]):
        res = runner.invoke(app, old)
        assert res.exit_code == 2 and "No such command" in res.output, (old, res.output)
