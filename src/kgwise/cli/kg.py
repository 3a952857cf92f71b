"""``kgwise kg …``: build, inspect and query knowledge graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import kg_app
from kgwise.cli.common import console, friendly_errors
from kgwise.kg import CSRGraph


@kg_app.command("stats")
@friendly_errors
def stats(file: Annotated[Path, typer.Argument(help="A graph file written by `kgwise kg build`.")]) -> None:
    """Print node, edge and relation counts of a built graph."""
    g = CSRGraph.load(file)
    console.print(f"{g.name or file.name}: {g.num_nodes:,} nodes, {g.num_edges:,} edges, "
                  f"{g.num_relations} relations")


@kg_app.command("neighbors")
@friendly_errors
def neighbors(
    file: Annotated[Path, typer.Argument(help="A graph file written by `kgwise kg build`.")],
    node: Annotated[str, typer.Argument(help="Node label (or numeric id).")],
    limit: Annotated[int, typer.Option(help="Show at most this many edges each way.")] = 50,
) -> None:
    """Print the edges leaving and entering NODE."""
    g = CSRGraph.load(file)
    v = g.node(int(node)) if node.isdigit() else g.node(node)
    rels, tails = g.out_edges(v)
    console.print(f"[bold]{g.label(v)}[/bold] (id {v}): {len(tails)} out, {len(g.in_edges(v)[1])} in")
    for r, t in list(zip(rels.tolist(), tails.tolist(), strict=True))[:limit]:
        console.print(f"  -[{g.relation_name(r)}]-> {g.label(t)}")
    rels, heads = g.in_edges(v)
    for r, h in list(zip(rels.tolist(), heads.tolist(), strict=True))[:limit]:
        console.print(f"  <-[{g.relation_name(r)}]- {g.label(h)}")
