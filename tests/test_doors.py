"""The thin doors of ``DESIGN.md``: ``kgwise.cli`` imports only ``kgwise.app``, ``kgwise.eval`` and the
layer-0/1 modules; ``kgwise.server`` only ``kgwise.app`` and layer 0 — so neither can assemble parts of the
product itself (static, over the source, counting imports and module-naming strings as
``tests/test_layers.py`` does)."""

from __future__ import annotations

from tests.test_layers import LAYERS, SRC, _imports, _package

DOORS: dict[str, set[str]] = {
    "cli": {"cli", "server", "app", "eval"} | {p for p, layer in LAYERS.items() if layer <= 1},
    "server": {"server", "app"} | {p for p, layer in LAYERS.items() if layer == 0},
}
"""Door package → the packages it may import (``kgwise serve`` starts the server: the CLI may import it)."""

def _crossings() -> dict[str, set[str]]:
    """Door file (relative to ``src/kgwise``) → the packages it imports beyond its door's rule."""
    out: dict[str, set[str]] = {}
    for door, allowed in DOORS.items():
        for path in sorted((SRC / door).rglob("*.py")):
            bad = {t for _, m in _imports(path) if (t := _package(m)) in LAYERS and t not in allowed}
            if bad:
                out[str(path.relative_to(SRC))] = bad
    return out


def test_doors_import_only_the_product_and_the_layers_below() -> None:
    found = {f: sorted(b) for f, b in _crossings().items()}
    assert not found, f"door files importing past app/eval (DESIGN.md, layer 6): {found}"
