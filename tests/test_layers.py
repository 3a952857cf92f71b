"""The layers of ``DESIGN.md``: every import inside ``src/kgwise`` runs downward (static, over the source).

An import counts wherever it stands (module top, function body, ``TYPE_CHECKING`` block), and so does a
string literal that names a kgwise module (``"kgwise.x.y"`` or ``"kgwise.x.y:Name"``), which is how an
``importlib`` reach upward would hide.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "kgwise"

LAYERS: dict[str, int] = {
    "types": 0, "arrays": 0, "errors": 0, "files": 0, "retry": 0, "config": 0, "settings": 0, "grading": 0,
    "progress": 0, "lazy": 0,
    "kg": 1, "llm": 1, "bandit": 1, "datasets": 1, "embed": 1,
    "extract": 2, "render": 2,
    "inject": 3, "route": 3, "conformal": 3, "kgm": 3,
    "app": 4,
    "eval": 5,
    "cli": 6, "server": 6, "__main__": 6,
}
"""Top-level module or package → its layer (``DESIGN.md``); ``kgwise/__init__`` and ``data`` stand apart."""

_MODULE_STRING = re.compile(r"^kgwise(?:\.\w+)+(?::\w+)?$")


def _package(module: str) -> str | None:
    """``kgwise.a.b`` → ``a``; anything outside kgwise → None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "kgwise" and len(parts) > 1 else None


def _own_package(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported kgwise module) of every import and module-naming string in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(
                node.value):
            found.append((node.lineno, node.value.split(":")[0]))
    return found


def _edges() -> list[tuple[str, int, str, str]]:
    """(file, line, importing package, imported package) for every kgwise import between packages."""
    edges = []
    for path in sorted(SRC.rglob("*.py")):
        own = _own_package(path)
        if own == "__init__":
            continue
        for line, module in _imports(path):
            target = _package(module)
            if target is not None and target != own:
                edges.append((str(path.relative_to(SRC.parent)), line, own, target))
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {_own_package(p) for p in SRC.rglob("*.py")} - {"__init__"}
    assert packages <= set(LAYERS), f"packages without a layer: {sorted(packages - set(LAYERS))}"


def test_no_upward_import() -> None:
    upward = [f"{file}:{line}: {own} (layer {LAYERS[own]}) imports {target} (layer {LAYERS[target]})"
              for file, line, own, target in _edges()
              if target in LAYERS and LAYERS[target] > LAYERS[own]]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_cycle_within_a_layer() -> None:
    graph: dict[str, set[str]] = {}
    for _, _, own, target in _edges():
        if target in LAYERS and LAYERS[target] == LAYERS[own]:
            graph.setdefault(own, set()).add(target)
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            nxt = todo.pop()
            assert nxt != start, f"import cycle between packages of layer {LAYERS[start]} through {start}"
            if nxt not in seen:
                seen.add(nxt)
                todo += graph.get(nxt, ())


@pytest.mark.parametrize("text, expected", [
    ("from kgwise.eval.route import x\n", [(1, "kgwise.eval.route")]),
    ("def f():\n    import kgwise.cli.main\n", [(2, "kgwise.cli.main")]),
    ("X = {'a': 'kgwise.eval.knowgpt:RL_AGENT'}\n", [(1, "kgwise.eval.knowgpt")]),
    ("from . import y\n", []),
])
def test_imports_are_found_everywhere(tmp_path: Path, text: str, expected: list[tuple[int, str]]) -> None:
    f = tmp_path / "m.py"
    f.write_text(text)
    assert _imports(f) == expected
