"""``kgwise kg subgraph``: ground a question in a graph and print its P_sub subgraph and paths."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from kgwise.cli.apps import kg_app
from kgwise.cli.common import JsonOption, console, distinct_outputs, err_console, friendly_errors, write_json
from kgwise.errors import ConfigError
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.kg.loaders import open_graph_file
from kgwise.kg.sources import GRAPH_FILE_HELP
from kgwise.types import CHOICE_LABELS, Choice, Question
from kgwise.types import Path as KgPath

_DEFAULT = SubgraphConfig()


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in text.split("|") if x.strip()] if text else []


def render_path(g: CSRGraph, path: KgPath) -> str:
    """``dog -[isa]-> animal <-[atlocation]- zoo`` (``<-`` marks an edge walked backwards)."""
    out = g.label(path.nodes[0])
    for i, r in enumerate(path.relations):
        name = g.relation_name(r)
        arrow = f" <-[{name}]- " if path.inverse[i] else f" -[{name}]-> "
        out += arrow + g.label(path.nodes[i + 1])
    return out


@kg_app.command("subgraph")
@friendly_errors
def subgraph(
    file: Annotated[Path, typer.Argument(help="The graph file: " + GRAPH_FILE_HELP + ".")],
    question: Annotated[str, typer.Option("--question", "-q", help="The question text.")],
    choices: Annotated[str | None, typer.Option("--choices", "-c", help='Answer choices, "a|b|c".')] = None,
    topic: Annotated[str | None, typer.Option(help='Topic entity names, "x|y" (used instead of the '
                                                   "question's n-grams).")] = None,
    hops: Annotated[int, typer.Option(min=1, help="Hops around the concepts.")] = _DEFAULT.hops,
    max_nodes: Annotated[int, typer.Option(min=1, help="Node cap.")] = _DEFAULT.max_nodes,
    max_expand: Annotated[int, typer.Option(min=1, help="Per-node expansion cap (hub rule).")
                          ] = _DEFAULT.max_expand,
    wordnet: Annotated[Path | None, typer.Option(help="WordNet dir (its *.exc help lemmatise).")] = None,
    show: Annotated[int, typer.Option(min=0, help="Print at most this many triples.")] = 100,
    json_out: JsonOption = None,
) -> None:
    """Ground QUESTION and CHOICES in FILE, then print the concepts, the P_sub triples and the paths."""
    distinct_outputs({"--json": json_out}, {"FILE": file, "--wordnet": wordnet})
    try:
        options = tuple(Choice(CHOICE_LABELS[i], c) for i, c in enumerate(_split(choices)))
        q = Question("", question, options, topic_entities=tuple(_split(topic)))
        cfg = SubgraphConfig(hops=hops, max_nodes=max_nodes, max_expand=max_expand)
    except (ValueError, IndexError) as exc:
        raise ConfigError(str(exc)) from exc
    g = open_graph_file(file)
    for name in q.topic_entities:
        if g.find(name) is None:
            err_console.print(f"[yellow]warning:[/yellow] the topic entity {name!r} is not in {file}")
    grounding = Grounder(g, GrounderConfig(wordnet_dir=wordnet)).ground(q)
    sg = SubgraphExtractor(g, cfg).extract(q, grounding)
    console.print("[bold]question concepts:[/bold] "
                  + escape(", ".join(g.label(n) for n in grounding.question_nodes) or "(none)"))
    for c, nodes in zip(q.choices, grounding.choice_nodes, strict=True):
        console.print(f"[bold]choice {c.label}[/bold] {escape(c.text)}: "
                      + escape(", ".join(g.label(n) for n in nodes) or "(none)"))
    console.print(f"[bold]subgraph:[/bold] {len(sg.nodes)} nodes, {len(sg.edges)} edges")
    for h, r, t in sg.edges[:show]:
        console.print(escape(f"  ({g.label(h)}, {g.relation_name(r)}, {g.label(t)})"))
    if len(sg.edges) > show:
        console.print(f"  … {len(sg.edges) - show} more (use --show)")
    console.print(f"[bold]paths:[/bold] {len(sg.paths)}")
    for p in sg.paths:
        console.print("  " + escape(render_path(g, p)))
    if json_out is not None:
        report: dict[str, Any] = {
            "question_concepts": [g.label(n) for n in grounding.question_nodes],
            "choice_concepts": [[g.label(n) for n in nodes] for nodes in grounding.choice_nodes],
            "triples": [[g.label(h), g.relation_name(r), g.label(t)] for h, r, t in sg.edges],
            "paths": [render_path(g, p) for p in sg.paths],
            "subgraph": sg.to_dict(),
        }
        write_json(report, json_out)
