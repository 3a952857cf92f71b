"""The guarantee suite runs only when asked for: ``pytest -m guarantee tests/guarantees``.

Like MAPIE's long tests, these repeat calibration over hundreds of random splits (minutes); a plain
``pytest`` run deselects them (reported as deselected, not skipped).
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "guarantee" in (config.getoption("markexpr") or ""):
        return
    keep = [i for i in items if i.get_closest_marker("guarantee") is None]
    dropped = [i for i in items if i.get_closest_marker("guarantee") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
