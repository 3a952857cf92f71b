"""Entry point of the ``kgwise`` command: imports each topic module so it registers its commands."""

from __future__ import annotations

from kgwise.cli.apps import app

# one import per topic module; each adds its commands to the groups in kgwise.cli.apps
from kgwise.cli import kg as _kg  # noqa: F401  isort: skip

__all__ = ["app"]

if __name__ == "__main__":
    app()
