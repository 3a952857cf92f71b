"""``python -m kgwise``: the ``kgwise`` command."""

from kgwise.cli.main import app

if __name__ == "__main__":
    app()
