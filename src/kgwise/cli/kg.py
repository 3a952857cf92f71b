"""``kgwise kg …``: build, inspect and query knowledge graphs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kgwise.cli.apps import kg_app
from kgwise.cli.common import (
    ConfigOption,
    JsonOption,
    console,
    distinct_outputs,
    friendly_errors,
    writable,
    write_json,
)
from kgwise.errors import ConfigError, UnknownNodeError
from kgwise.kg import CSRGraph
from kgwise.kg.csr import npz_path
from kgwise.kg.loaders import FORMATS, load_graph, merge_graphs, open_graph_file
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.kg.sources import GRAPH_FILE_HELP, GRAPH_SPEC_HELP, is_endpoint, open_graph


@kg_app.command("build")
@friendly_errors
def build(
    sources: Annotated[list[Path], typer.Argument(help="One or more KG sources (files or directories).")],
    formats: Annotated[
        list[str],
        typer.Option("--format", "-f", help="Source format, once for all sources or once per source: "
                     + ", ".join(f"{k} ({v})" for k, v in FORMATS.items()) + "."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Graph file to write (.npz).", callback=writable)],
    merge_relations: Annotated[
        Path | None,
        typer.Option("--merge-relations", help="KagNet relation-merging file for ConceptNet sources "
                     "(e.g. conceptnet/merge_relation_kagnet.txt)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Graph name (default: the sources' names).")] = None,
    wordnet_senses: Annotated[
        str,
        typer.Option("--wordnet-senses", help="WordNet word-sense edges: 'all', or 'frequent' (the senses "
                     "SemCor tags, else a word's first; drops e.g. 'go' as a word for the drug 'adam')."),
    ] = "all",
    aliases: Annotated[Path | None, typer.Option(
        "--aliases", help="Alias file for a tsv source: label<TAB>alias[<TAB>alias…] lines (other "
        "formats keep the names their source gives).")] = None,
    merge_names: Annotated[bool | None, typer.Option(
        "--merge-names/--keep-names", help="Merge a node whose label is another node's alias, and nodes "
        "whose labels differ only in case, accents, hyphens or ae/oe spelling (each merge counted and "
        "listed with --report). Default: merge when a source is a tsv file (a user's graph); WordNet and "
        "ConceptNet name distinct senses by case ('March', 'march').", show_default=False)] = None,
    report_out: Annotated[Path | None, typer.Option(
        "--report", callback=writable, help="Write every finding here: header rows, broken lines "
        "(file:line), duplicate triples, self-loops, dangling and conflicting aliases, merged nodes.")
    ] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Stop at the first broken line of a tsv source instead of counting and skipping "
        "it.")] = False,
) -> None:
    """Load SOURCE(s) and save them as one graph: a source keeps its labels as spelled, and every other
    name it gives a node as an alias; several sources are merged, their nodes unified by normalised label
    (case, '_' and spaces ignored). Then names that mean one node are merged (see --merge-names); what the
    build found and changed is counted on screen and listed with --report, never dropped silently."""
    if len(formats) not in (1, len(sources)):
        raise ConfigError(f"give --format once, or once per source ({len(sources)}); got {len(formats)}")
    per_source = formats * len(sources) if len(formats) == 1 else formats
    if wordnet_senses != "all" and "wordnet" not in per_source:
        raise ConfigError("--wordnet-senses applies to a wordnet source; none is given")
    if aliases is not None and per_source.count("tsv") != 1:
        raise ConfigError("--aliases applies to exactly one tsv source")
    distinct_outputs({"--out": npz_path(out)}, {"SOURCE": sources, "--merge-relations": merge_relations})
    from kgwise.kg.clean import BuildReport
    from kgwise.kg.clean import merge_names as merge

    report = BuildReport(strict=strict)
    graphs = []
    for src, fmt in zip(sources, per_source, strict=True):
        t0 = time.perf_counter()
        g = load_graph(src, fmt, merge_relations if fmt.startswith("conceptnet") else None,
                       wordnet_senses if fmt == "wordnet" else "all", aliases if fmt == "tsv" else None,
                       report=report if fmt == "tsv" else None)
        console.print(f"loaded {src} ({fmt}): {g.num_nodes:,} nodes, {g.num_edges:,} edges, "
                      f"{g.num_relations} relations, {len(g.alias_pairs()[1]):,} aliases "
                      f"in {time.perf_counter() - t0:.2f} s")
        graphs.append(g)
    graph = graphs[0] if len(graphs) == 1 else merge_graphs(graphs)
    if merge_names or (merge_names is None and "tsv" in per_source):
        graph = merge(graph, report)
    if name is not None:
        graph.name = name
    path = graph.save(out)
    console.print(f"wrote {path}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
                  f"{graph.num_relations} relations")
    for line in report.broken[:5]:
        console.print(escape(f"  skipped {line}"))
    if len(report.broken) > 5:
        console.print(f"  … {len(report.broken) - 5} more broken lines")
    console.print(escape(f"build findings: {report.summary()}")
                  + (f" (listed in {report_out})" if report_out is not None else
                     " (--report FILE lists them)" if report.counts() != dict.fromkeys(report.counts(), 0)
                     else ""))
    if report_out is not None:
        report_out.parent.mkdir(parents=True, exist_ok=True)
        report_out.write_text(report.to_text(), encoding="utf-8")


@kg_app.command("stats")
@friendly_errors
def stats(file: Annotated[Path, typer.Argument(help="The graph file: " + GRAPH_FILE_HELP + ".")]) -> None:
    """Print node, edge and relation counts of a graph file."""
    g = open_graph_file(file)
    console.print(f"{g.name or file.name}: {g.num_nodes:,} nodes, {g.num_edges:,} edges, "
                  f"{g.num_relations} relations")


@kg_app.command("neighbors")
@friendly_errors
def neighbors(
    graph: Annotated[str, typer.Argument(help="The KG: " + GRAPH_SPEC_HELP + ".")],
    node: Annotated[str, typer.Argument(help="Node label (or numeric id, for a graph file).")],
    limit: Annotated[int, typer.Option(min=0, help="Show at most this many edges each way.")] = 50,
) -> None:
    """Print the edges leaving and entering NODE."""
    g = open_graph(graph)
    if isinstance(g, CSRGraph):
        v = g.node(int(node)) if node.isdigit() else g.node(node)
    else:
        found = g.find(node)
        if found is None:
            raise UnknownNodeError(f"no node labelled {node!r} in {graph}")
        v = found
    rels, tails = g.out_edges(v)
    console.print(f"[bold]{escape(g.label(v))}[/bold] (id {v}): {len(tails)} out, {len(g.in_edges(v)[1])} in")
    for r, t in list(zip(rels.tolist(), tails.tolist(), strict=True))[:limit]:
        console.print(escape(f"  -[{g.relation_name(r)}]-> {g.label(t)}"))
    if len(tails) > limit:
        console.print(f"  … {len(tails) - limit} more out (use --limit)")
    rels, heads = g.in_edges(v)
    for r, h in list(zip(rels.tolist(), heads.tolist(), strict=True))[:limit]:
        console.print(escape(f"  <-[{g.relation_name(r)}]- {g.label(h)}"))
    if len(heads) > limit:
        console.print(f"  … {len(heads) - limit} more in (use --limit)")


@kg_app.command("export")
@friendly_errors
def export(
    graph: Annotated[str, typer.Argument(help="The graph file: " + GRAPH_FILE_HELP + ".")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", callback=writable, help="N-Triples file to write (.nt, or .nt.gz), e.g. to load into "
        "a triple store and query with --kg sparql:URL.")],
    format: Annotated[str, typer.Option("--format", help="Output format: nt (N-Triples, what triple "
                                        "stores' bulk loaders read).")] = "nt",
) -> None:
    """Write a graph as N-Triples: node i is <urn:kgwise:node:i> with its label as rdfs:label and its
    aliases as skos:altLabel. Bulk-load it into a store (Virtuoso: ld_dir + rdf_loader_run, see
    docs/grounding.md)."""
    if format != "nt":
        raise ConfigError(f"--format {format!r}: the export format is nt (N-Triples)")
    if is_endpoint(graph):
        raise ConfigError("kg export reads a graph file, not an endpoint")
    distinct_outputs({"--out": out}, {"GRAPH": graph})
    g = open_graph_file(graph)
    t0 = time.perf_counter()
    write_ntriples(g, out)
    console.print(f"wrote {out}: {g.num_nodes:,} nodes, {g.num_edges:,} edges "
                  f"in {time.perf_counter() - t0:.1f} s")


index_app = typer.Typer(help="Persistent label indexes (SQLite FTS5) for grounding in large KGs.",
                        no_args_is_help=True)
kg_app.add_typer(index_app, name="index")


@index_app.command("build")
@friendly_errors
def index_build(
    source: Annotated[str, typer.Argument(help="The KG: " + GRAPH_SPEC_HELP + ".")],
    out: Annotated[Path, typer.Option("--out", "-o", callback=writable, help="Index file to write.")],
    dump: Annotated[bool, typer.Option(
        "--dump", help="SOURCE is an N-Triples dump to stream (its IRIs, as the store it was loaded into "
        "serves them) instead of a graph file to load.")] = False,
    page: Annotated[int, typer.Option(min=100, help="Name triples per query from an endpoint.")] = 10_000,
    hub_stats: Annotated[bool, typer.Option(
        "--hub-stats", help="From an endpoint: also read every edge reachable from a named node (500 nodes "
        "per query) for P_sub's degrees and hub lists (a graph file or a dump always gives them).")] = False,
) -> None:
    """Index every node name (labels and aliases) of SOURCE on disk, with its content hash, for grounding
    without loading the labels ([kg] index of a pipeline, and `kgwise kg ground --index`). It also
    keeps P_sub's degrees and hub lists (from a graph file or a dump; from an endpoint with --hub-stats),
    so P_sub over the store (`kgwise kg export --format nt` + the store's loader) reads only short edge
    lists."""
    from kgwise.kg.label_index import build_index

    distinct_outputs({"--out": out}, {"SOURCE": source})
    if dump and is_endpoint(source):
        raise ConfigError("--dump reads an N-Triples file, not an endpoint")
    if hub_stats and not is_endpoint(source):
        raise ConfigError("--hub-stats reads an endpoint's edges; a graph file or a dump always gives them")
    built = build_index(f"nt:{source}" if dump else source, out, page,
                        progress=lambda m: console.print(f"[dim]{m}[/dim]"), hub_stats=hub_stats)
    console.print(f"wrote {built.path}: {built.nodes:,} nodes, {built.names:,} names from {built.source} "
                  f"({built.kind}, {built.content_hash[:19]}…) in {built.seconds:.1f} s")


@kg_app.command("ground")
@friendly_errors
def ground(
    text: Annotated[str, typer.Argument(help="A question or entity name.")],
    kg: Annotated[str, typer.Option("--kg", help="The KG: " + GRAPH_SPEC_HELP + ".")],
    index: Annotated[Path | None, typer.Option(
        "--index", help="A label index of the KG (`kgwise kg index build`): needed for an endpoint.")] = None,
    config: ConfigOption = None,
    json_out: JsonOption = None,
) -> None:
    """Link TEXT to KG nodes: exact names and aliases, then (where those find nothing) fuzzy and embedding
    matches, thresholds from the [linking] table of --config; each link with its method and score, and
    the topic entities a UAG question would start from."""
    from kgwise.cli.linking import make_grounder

    g = open_graph(kg)
    grounder = make_grounder(g, index, config)
    from kgwise.kg.linking import Link, did_you_mean

    links: list[Link] = []
    nodes = grounder.ground_text(text, links)
    topics = grounder.topic_entities(text)
    for link in links:
        console.print(escape(f"  {link.mention!r} → {g.label(link.node)} (matched {link.name!r}: "
                             f"{link.method}, score {link.score:.2f})"))
    if not nodes:
        console.print("no node found" + escape(did_you_mean(text, grounder)))
    console.print("[bold]topic entities:[/bold] " + escape(", ".join(g.label(x.node) for x in topics) or "—"))
    write_json({"text": text, "links": [x.to_dict() | {"label": g.label(x.node)} for x in links],
                "topic_entities": [g.label(x.node) for x in topics]}, json_out)
