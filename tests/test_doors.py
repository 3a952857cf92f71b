"""The thin doors of ``DESIGN.md``: ``kgwise.cli`` imports only ``kgwise.app``, ``kgwise.eval`` and the
layer-0/1 modules; ``kgwise.server`` only ``kgwise.app`` and layer 0 — so neither can assemble parts of the
product itself (static, over the source, counting imports and module-naming strings as
``tests/test_layers.py`` does).

``PENDING`` names the imports that break the rule today, each with the module that still holds the work
the door should leave to ``app`` or ``eval``; the test fails on any other, and on a pending one that is
gone (so the list only shrinks)."""

from __future__ import annotations

from tests.test_layers import LAYERS, SRC, _imports, _package

DOORS: dict[str, set[str]] = {
    "cli": {"cli", "server", "app", "eval"} | {p for p, layer in LAYERS.items() if layer <= 1},
    "server": {"server", "app"} | {p for p, layer in LAYERS.items() if layer == 0},
}
"""Door package → the packages it may import (``kgwise serve`` starts the server: the CLI may import it)."""

PENDING: dict[str, set[str]] = {
    # the config tables of research commands register when their modules load
    "cli/main.py": {"conformal", "inject", "kgm", "route"},
    # KG-model training and UAG's research tables call their packages directly
    "cli/kgm.py": {"kgm"},
    "cli/conformal.py": {"conformal"},
}
"""Door file → the packages it still imports past its door."""


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
    found = _crossings()
    new = {f: sorted(b - PENDING.get(f, set())) for f, b in found.items() if b - PENDING.get(f, set())}
    assert not new, f"door files importing past app/eval (DESIGN.md, layer 6): {new}"


def test_pending_crossings_are_still_there() -> None:
    found = _crossings()
    gone = {f: sorted(b - found.get(f, set())) for f, b in PENDING.items() if b - found.get(f, set())}
    assert not gone, f"no longer imported (drop them from PENDING): {gone}"
