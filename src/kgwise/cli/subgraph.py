"""``kgwise kg subgraph``: ground a question in a graph file and print its KG evidence — the concepts, P_sub's
triples and paths (:func:`kgwise.app.evidence.graph_evidence`; a pipeline's is ``POST /v1/evidence``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kgwise.cli.apps import kg_app
from kgwise.cli.common import JsonOption, console, distinct_outputs, err_console, friendly_errors, write_json
from kgwise.kg.sources import GRAPH_FILE_HELP


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in text.split("|") if x.strip()] if text else []


@kg_app.command("subgraph")
@friendly_errors
def subgraph(
    file: Annotated[Path, typer.Argument(help="The graph file: " + GRAPH_FILE_HELP + ".")],
    question: Annotated[str, typer.Option("--question", "-q", help="The question text.")],
    choices: Annotated[str | None, typer.Option("--choices", "-c", help='Answer choices, "a|b|c".')] = None,
    topic: Annotated[str | None, typer.Option(help='Topic entity names, "x|y" (used instead of the '
                                                   "question's n-grams).")] = None,
    hops: Annotated[int | None, typer.Option(min=1, help="Hops around the concepts (default: P_sub's).",
                                             show_default=False)] = None,
    max_nodes: Annotated[int | None, typer.Option(min=1, help="Node cap (default: P_sub's).",
                                                  show_default=False)] = None,
    max_expand: Annotated[int | None, typer.Option(min=1, help="Per-node expansion cap, the hub rule "
                                                   "(default: P_sub's).", show_default=False)] = None,
    wordnet: Annotated[Path | None, typer.Option(help="WordNet dir (its *.exc help lemmatise).")] = None,
    show: Annotated[int, typer.Option(min=0, help="Print at most this many triples.")] = 100,
    json_out: JsonOption = None,
) -> None:
    """Ground QUESTION and CHOICES in FILE, then print the concepts, the P_sub triples and the paths."""
    from kgwise.app.evidence import graph_evidence

    distinct_outputs({"--json": json_out}, {"FILE": file, "--wordnet": wordnet})
    ev, unknown = graph_evidence(file, question, _split(choices), _split(topic), hops, max_nodes, max_expand,
                                 wordnet)
    for name in unknown:
        err_console.print(f"[yellow]warning:[/yellow] the topic entity {name!r} is not in {file}")
    console.print("[bold]question concepts:[/bold] " + escape(", ".join(ev.question_concepts) or "(none)"))
    for i, (c, nodes) in enumerate(zip(_split(choices), ev.choice_concepts, strict=True)):
        console.print(f"[bold]choice {chr(ord('A') + i)}[/bold] {escape(c)}: "
                      + escape(", ".join(nodes) or "(none)"))
    for link in ev.links:
        console.print(escape(f"  {link.mention!r} → {link.concept} ({link.method}, {link.score:.2f})"))
    console.print(f"[bold]subgraph:[/bold] {len({x for t in ev.triples for x in (t.head, t.tail)})} "
                  f"concepts, {len(ev.triples)} triples")
    for t in ev.triples[:show]:
        console.print(escape(f"  ({t.head}, {t.relation}, {t.tail})"))
    if len(ev.triples) > show:
        console.print(f"  … {len(ev.triples) - show} more (use --show)")
    console.print(f"[bold]paths:[/bold] {len(ev.paths)}")
    for p in ev.paths:
        console.print("  " + escape(p.render()))
    if json_out is not None:
        write_json(asdict(ev) | {"rendered_paths": [p.render() for p in ev.paths]}, json_out)
