"""The code stays ``ruff`` and ``mypy`` clean (versions pinned in the ``dev`` extra; settings in
``pyproject.toml``: mypy checks ``src/kgwise`` and ``tests``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "src", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow  # about a minute on two cores without a cache
def test_mypy_finds_nothing() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr
