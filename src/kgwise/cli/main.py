"""Entry point of the ``kgwise`` command: imports each topic module so it registers its commands, then lists
the product's commands first (``kgwise --help``) and the research and KG tools after them."""

from __future__ import annotations

import kgwise.eval.recorded  # noqa: F401  registers the shared data's recordings as replay sources
from kgwise import settings
from kgwise.cli.apps import app

# one import per topic module; each adds its commands to the groups in kgwise.cli.apps
from kgwise.cli import pipeline as _pipeline  # noqa: F401  isort: skip
from kgwise.cli import llm as _llm  # noqa: F401  isort: skip
from kgwise.cli import serve as _serve  # noqa: F401  isort: skip
from kgwise.cli import kg as _kg  # noqa: F401  isort: skip
from kgwise.cli import subgraph as _subgraph  # noqa: F401  isort: skip
from kgwise.cli import bench as _bench  # noqa: F401  isort: skip
from kgwise.cli import bench_openai as _bench_openai  # noqa: F401  isort: skip
from kgwise.cli import bench_pipeline as _bench_pipeline  # noqa: F401  isort: skip
from kgwise.cli import bench_llm as _bench_llm  # noqa: F401  isort: skip
from kgwise.cli import data as _data  # noqa: F401  isort: skip
from kgwise.cli import kgm as _kgm  # noqa: F401  isort: skip
from kgwise.cli import eval_route as _eval_route  # noqa: F401  isort: skip
from kgwise.cli import conformal as _conformal  # noqa: F401  isort: skip
from kgwise.cli import knowgpt as _knowgpt  # noqa: F401  isort: skip
from kgwise.cli import external as _external  # noqa: F401  isort: skip
from kgwise.cli import eval_pipeline as _eval_pipeline  # noqa: F401  isort: skip
from kgwise.cli import eval_abstain as _eval_abstain  # noqa: F401  isort: skip
from kgwise.cli import settings as _settings  # noqa: F401  isort: skip
from kgwise.cli import state as _state  # noqa: F401  isort: skip

__all__ = ["PRODUCT", "app"]

PRODUCT = ("init", "fit", "ask", "feedback", "status", "serve")
"""The pipeline's commands, listed first and in this order by ``kgwise --help``; every other command and
group is a research or KG tool, listed after them under its own heading."""

app.registered_commands.sort(key=lambda c: PRODUCT.index(c.name) if c.name in PRODUCT else len(PRODUCT))
for _group in app.registered_groups:
    _group.rich_help_panel = "Research and KG tools"


def _register_tables() -> None:
    """Import every module that registers a config table or a command's own defaults."""
    import kgwise.conformal.calibrated
    import kgwise.eval.knowgpt
    import kgwise.inject.bandit
    import kgwise.kg.linking
    import kgwise.kgm.config
    import kgwise.route.coke  # noqa: F401


settings.on_demand(_register_tables)

if __name__ == "__main__":
    app()
