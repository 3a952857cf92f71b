"""Entry point of the ``kgwise`` command: imports each topic module so it registers its commands, then lists
the product's commands first (``kgwise --help``), its other groups and the research and KG tools after
them."""

from __future__ import annotations

import kgwise.eval.recorded  # noqa: F401  registers the shared data's recordings as replay sources
from kgwise import settings
from kgwise.cli.apps import app
from kgwise.eval import register_tables

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

__all__ = ["PIPELINE_TOOLS", "PRODUCT", "app"]

PRODUCT = ("init", "fit", "ask", "feedback", "status", "serve")
"""The pipeline's commands, listed first and in this order by ``kgwise --help``; then the groups of
:data:`PIPELINE_TOOLS`, then the research and KG tools, each under its own heading."""

PIPELINE_TOOLS = ("route", "state")
"""The pipeline's other groups (external routing, its state), listed after its commands."""

app.registered_commands.sort(key=lambda c: PRODUCT.index(c.name) if c.name in PRODUCT else len(PRODUCT))
app.registered_groups.sort(key=lambda g: g.name not in PIPELINE_TOOLS)
for _group in app.registered_groups:
    _group.rich_help_panel = "Pipeline tools" if _group.name in PIPELINE_TOOLS else "Research and KG tools"


settings.on_demand(register_tables)

if __name__ == "__main__":
    app()
