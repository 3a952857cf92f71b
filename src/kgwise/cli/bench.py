"""``kgwise bench kg`` (the knowledge-graph speed benchmark, ``kgwise.eval.bench.kg``) and
``kgwise bench sparql`` (traversal over a SPARQL endpoint, ``kgwise.eval.bench.sparql``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from kgwise.cli.apps import bench_app
from kgwise.cli.common import DataOption, JsonOption, comma_list, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.eval.bench.kg import GRAPHS, run_kg_benchmark
from kgwise.llm.local_models import DEFAULT_LLM
from kgwise.types import Question


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report)
    ours = [report[n].get("psub_median_ms_nx_subset", report[n]["psub_median_ms"]) for n in names]
    base = [report[n]["nx_psub_median_ms"] for n in names]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], ours, width=0.4, label="kgwise (CSR, numpy)")
    ax.bar([i + 0.2 for i in x], base, width=0.4, label="networkx baseline")
    ax.set_xticks(list(x), names)
    ax.set_yscale("log")
    ax.set_ylabel("grounding + P_sub, median ms / question")
    ax.set_title("same questions for both (the baseline's subset)", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@bench_app.command("kg")
@friendly_errors
def bench_kg(
    data: DataOption = None,
    json_out: JsonOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Questions per graph (default: all).")] = None,
    nx_limit: Annotated[int | None, typer.Option(min=1, help="Questions for the networkx baseline (default: "
                                                      "--limit); the ratio uses the same questions.")] = None,
    graphs: Annotated[str, typer.Option(help="Comma-separated: " + ", ".join(GRAPHS))] = ",".join(GRAPHS),
    workdir: Annotated[Path | None, typer.Option(help="Where graph caches and logs go (default: "
                                                      "OUT_work beside --json OUT, else temp).")] = None,
    resume: Annotated[bool, typer.Option(help="Keep graphs already in the --json file.")] = False,
) -> None:
    """Build time, cached load, peak memory, grounding + P_sub latency, and the networkx ratio."""
    root = data_dir(data)
    names = comma_list(graphs, "--graphs", str)
    unknown = [g for g in names if g not in GRAPHS]
    if unknown:
        raise ConfigError(f"unknown graph(s) {unknown}; choose from {', '.join(GRAPHS)}")
    previous: dict[str, Any] = {}
    if resume and json_out is not None and json_out.is_file():
        previous = json.loads(json_out.read_text(encoding="utf-8"))
    work = workdir or (json_out.parent / (json_out.stem + "_work") if json_out is not None
                       else Path(tempfile.mkdtemp(prefix="kgwise-bench-kg-")))

    report = run_kg_benchmark(root, work, limit=limit, graphs=names, nx_limit=nx_limit, previous=previous,
                              on_result=lambda r: _save(r, json_out),
                              progress=lambda m: err_console.print(f"[dim]{m}[/dim]"))
    write_json(report, json_out)
    if json_out is not None and report:
        plot = json_out.with_suffix(".png")
        _plot(report, plot)
        err_console.print(f"plot written to {plot}")


@bench_app.command("sparql")
@friendly_errors
def bench_sparql(
    endpoint: Annotated[str, typer.Option(help="SPARQL query endpoint URL (e.g. Oxigraph serving the "
                                               "graph that `kgwise kg export` wrote).")],
    kg: Annotated[Path, typer.Option(help="The same graph as a file (.npz, .tsv, .nt): the baseline.")],
    dataset: Annotated[str, typer.Option(help="Questions with topic entities: webqsp or cwq.")] = "webqsp",
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Your questions (JSONL: id, text, topic_entities) instead of --dataset.",
        exists=True, dir_okay=False)] = None,
    limit: Annotated[int, typer.Option(min=1, help="Questions.")] = 200,
    hops: Annotated[int, typer.Option(min=1, help="Hops of the walk from the topic entities.")] = 2,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Per question: topic entities by name, then every out-edge up to HOPS hops, on the local graph and
    on the endpoint (cold and warm cache); median and mean ms, the ratios, and whether the edges agree."""
    from kgwise.eval.bench.sparql import run_sparql_benchmark
    from kgwise.kg.sources import open_graph
    from kgwise.kg.sparql import SPARQLGraph

    qs = _questions(questions, dataset, data)
    topics = [q.topic_entities for q in qs if q.topic_entities][:limit]
    if not topics:
        raise ConfigError(f"{questions or dataset}: no question names topic entities (topic_entities)")
    report = run_sparql_benchmark(open_graph(kg), SPARQLGraph(endpoint.removeprefix("sparql:")), topics, hops)
    name = questions.stem if questions is not None else dataset
    report |= {"dataset": name, "kg": str(kg), "url": endpoint}
    write_json(report, json_out)


@bench_app.command("grounding")
@friendly_errors
def bench_grounding(
    data: DataOption = None,
    json_out: JsonOption = None,
    parts: Annotated[str, typer.Option(help="Comma-separated: links, csqa, medqa, scale, webqsp.")
                     ] = "links,csqa,medqa,scale,webqsp",
    links: Annotated[Path | None, typer.Option(
        "--links", help="Directory of the labelled link sets (default: tests/data/links of this "
        "checkout).", exists=True, file_okay=False)] = None,
    medqa_limit: Annotated[int, typer.Option(min=1, help="MedQA test questions.")] = 200,
    csqa_limit: Annotated[int | None, typer.Option(
        min=1, help="CSQA ihdev questions (default: all).")] = None,
    scale_nodes: Annotated[int, typer.Option(min=1000, help="Nodes of the synthetic graph.")] = 1_600_000,
    scale_edges: Annotated[int, typer.Option(min=1000, help="Edges of the synthetic graph.")] = 3_400_000,
    scale_limit: Annotated[int, typer.Option(
        min=1, help="Questions grounded over the synthetic graph and the WebQSP fragment.")] = 200,
    stores: Annotated[str, typer.Option(
        help="Comma-separated SPARQL stores the graphs are loaded into: virtuoso, oxigraph (none: '').")
                      ] = "virtuoso,oxigraph",
    embeddings: Annotated[bool, typer.Option(
        help="MiniLM embedding fallback on MedQA/DDB and the link sets (KGs under 50,000 names).")] = True,
    workdir: Annotated[Path | None, typer.Option(
        help="Where graphs, indexes and the Virtuoso database go (default: OUT_work beside --json OUT, "
             "else temp).")] = None,
    keep_stores: Annotated[bool, typer.Option(
        help="Keep the loaded Virtuoso/Oxigraph databases in --workdir and reuse them in a later run over "
             "the same graph (the bulk load is paid once).")] = False,
) -> None:
    """Link precision and recall on the labelled link sets (earlier vs precise rules), grounding recall
    (CSQA gold choices, MedQA options) exact-only vs aliases + fallbacks, and label-index
    grounding + P_sub over Virtuoso and Oxigraph vs the in-memory graph, at ConceptNet scale and on the
    WebQSP Freebase fragment (with its targets)."""
    from kgwise.eval.bench.grounding import run_grounding_benchmark

    names = comma_list(parts, "--parts", str)
    bad = [p for p in names if p not in ("links", "csqa", "medqa", "scale", "webqsp")]
    if bad:
        raise ConfigError(f"unknown part(s) {bad}; choose from links, csqa, medqa, scale, webqsp")
    work = workdir or (json_out.parent / (json_out.stem + "_work") if json_out is not None
                       else Path(tempfile.mkdtemp(prefix="kgwise-bench-grounding-")))
    encoder = None
    if embeddings and ("medqa" in names or "links" in names):
        from kgwise.embed import MiniLM

        encoder = MiniLM()
    report = run_grounding_benchmark(
        data_dir(data), work, medqa_limit=medqa_limit, csqa_limit=csqa_limit, scale_nodes=scale_nodes,
        scale_edges=scale_edges, scale_limit=scale_limit,
        stores=[x.strip() for x in stores.split(",") if x.strip()], encoder=encoder, keep_stores=keep_stores,
        parts=names, links_dir=links,
        progress=lambda m: err_console.print(f"[dim]{m}[/dim]"), on_result=lambda r: _save(r, json_out))
    write_json(report, json_out)


def _save(report: dict[str, Any], json_out: Path | None) -> None:
    """Write the report so far (a long run keeps what it measured)."""
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


@bench_app.command("serve")
@friendly_errors
def bench_serve(
    kg: Annotated[Path | None, typer.Option(help="Graph file to serve (default: DDB, built from --data).")
                  ] = None,
    dataset: Annotated[str, typer.Option(help="Questions sent (test split).")] = "medqa",
    questions: Annotated[Path | None, typer.Option(
        "--questions", help="Your multiple-choice questions (JSONL: id, text, choices) instead of --dataset; "
        "needs --kg.", exists=True, dir_okay=False)] = None,
    requests: Annotated[int, typer.Option(min=1, max=20_000, help="Requests per concurrency for "
                                          "/v1/evidence, and /v1/route+feedback pairs on the chat server.")
                        ] = 1000,
    answer_requests: Annotated[int, typer.Option(
        min=1, max=500, help="Answers by the LLM per concurrency (an eighth, at least 2, at concurrency "
        "1).")] = 16,
    concurrency: Annotated[str, typer.Option(help="Comma-separated concurrency levels (≤ 64).")] = "1,8,32",
    phase_s: Annotated[float, typer.Option(min=1.0, max=600.0, help="Time limit of each phase (s).")] = 120.0,
    llm: Annotated[str, typer.Option(help="Local LLM the server answers with.")] = DEFAULT_LLM,
    queue: Annotated[int, typer.Option(min=0, help="The server's --queue.")] = 4,
    chat_requests: Annotated[int, typer.Option(
        min=0, max=20_000, help="/v1/chat/completions requests per concurrency on a second server, a "
        "pipeline replaying recorded WebQSP answers (no model time; 0: skip).")] = 1000,
    replicas: Annotated[int, typer.Option(
        min=0, max=8, help="Instead: K `serve --config` replicas of the replay pipeline over one PostgreSQL "
        "(started here): the shared budget (--budget-calls) under --chat-requests completions with kills, "
        "throughput with 1 … K replicas, the PostgreSQL state's overhead over the folder's "
        "(docs/scale-out.md); --concurrency's largest level.")] = 0,
    budget_calls: Annotated[int, typer.Option(min=1, help="--replicas: the shared budget, in calls.")] = 100,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """A bounded load on a real `kgwise serve --config` over a one-arm KnowGPT pipeline (started here on
    127.0.0.1): throughput, p50/p99, status codes, errors and the server's RSS per endpoint and
    concurrency, /health latency under the answer load, and what a client refused for load gets; then
    /v1/chat/completions on a replay pipeline (targets ≥ 100 requests/s at concurrency 8, p99 ≤ 100 ms)
    and /v1/route+feedback pairs on its external arms. With --replicas K: replicas sharing one router and
    budget in PostgreSQL instead."""
    from kgwise.datasets import load
    from kgwise.eval.bench.serve import ServeBenchConfig, run_chat_benchmark, run_serve_benchmark

    levels = comma_list(concurrency, "--concurrency", int)
    if not all(1 <= c <= 64 for c in levels):
        raise ConfigError(f"--concurrency {concurrency!r}: levels must lie in [1, 64]")
    if questions is not None and kg is None:
        raise ConfigError("--questions needs --kg GRAPH (the default graph is DDB, MedQA's)")
    work = Path(tempfile.mkdtemp(prefix="kgwise-bench-serve-"))
    if kg is None:
        from kgwise.kg.loaders import load_ddb

        kg = load_ddb(data_dir(data) / "ddb").save(work / "ddb.npz")
    qs = [(q.text, [c.text for c in q.choices]) for q in _questions(questions, dataset, data) if q.choices]
    if not qs:
        raise ConfigError(f"{questions or dataset}: no multiple-choice questions to send")
    cfg = ServeBenchConfig(concurrency=levels, requests=requests, answer_requests=answer_requests,
                           phase_s=phase_s, llm=llm, queue=queue, chat_requests=chat_requests)
    say = lambda m: err_console.print(f"[dim]{m}[/dim]")  # noqa: E731
    if replicas:
        from kgwise.eval.bench.replicas import ReplicaBenchConfig, run_replica_benchmark

        recorded = [q.text for q in load("webqsp", "test", data_dir(data))]
        rcfg = ReplicaBenchConfig(replicas, max(chat_requests, 1), max(levels), budget_calls,
                                  phase_s=max(phase_s, 60.0))
        write_json(run_replica_benchmark(kg, recorded, rcfg, work, progress=say), json_out)
        return
    report = run_serve_benchmark(kg, qs, cfg, work, progress=say)
    report["dataset"] = questions.stem if questions is not None else dataset
    if chat_requests:
        recorded = [q.text for q in load("webqsp", "test", data_dir(data))]
        report["chat"] = run_chat_benchmark(kg, recorded, cfg, work, progress=say)
    write_json(report, json_out)


def _questions(path: Path | None, dataset: str, data: Path | None) -> list[Question]:
    """The questions of ``--questions FILE`` when given, else the test split of ``--dataset``."""
    if path is not None:
        from kgwise.datasets.user import read_questions

        return read_questions(path)
    from kgwise.datasets import load

    return load(dataset, "test", data_dir(data))
