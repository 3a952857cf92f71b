"""``kgwise bench grounding``: precision and recall of links on labelled sets, recall of grounding with
aliases and fallbacks, and grounding + P_sub over a label index and a SPARQL store (Virtuoso) at ConceptNet
scale, each figure against a baseline of the same run.

* **Labelled links** (``tests/data/links``, :mod:`kgwise.eval.bench.linksets`): MedQA options → DDB, CSQA
  question concepts and choices → the CSQA KG, and a user's geography TSV KG with aliases, misspellings,
  accents and acronyms (built and cleaned as ``kgwise kg build`` does): link precision and recall per
  method, with the earlier rules (``GrounderConfig(precise=False)``, the baseline) and the precise ones.

* **CSQA ihdev** on the CSQA KG (WordNet + the ConceptNet slice): the share of questions whose gold choice
  grounds to a node, exact labels only (the baseline) vs labels + aliases + fuzzy fallback; on the gold
  choices exact matching already grounds, the share grounded to the very same nodes (precision kept).
* **MedQA** (first ``medqa_limit`` test questions) on DDB: the share of options grounded, before (labels
  only) and after (aliases + fuzzy + embedding fallbacks, if an encoder is given).
* **ConceptNet scale** (:mod:`kgwise.eval.bench.synthetic`): label-index build time from the graph file;
  grounding of CSQA ihdev questions over the index in a fresh subprocess holding only the index and an
  endpoint client (median ms, peak process RSS); per store (Virtuoso, Oxigraph): the export + bulk-load
  time, then grounding + P_sub over the endpoint cold (first pass) and warm (second pass) against the
  in-memory CSR path (the baseline, in its own subprocess). *Cold* is a fresh kgwise process with empty
  client caches; the store's own caches are as the bulk load left them, or empty when the store is one
  kept by an earlier run (``keep_stores``: a freshly started server, ``store_reused`` in the report).
* **WebQSP Freebase fragment** (``webqsp/freebase_fragment.tsv``): the same, with the WebQSP test
  questions grounded as free text (their named topic entities dropped), beside the synthetic graph.

P_sub over an endpoint (:func:`endpoint_psub`) is the extractor a pipeline with ``[kg] sparql = URL`` runs:
the hub rule's degrees and hub lists come from the label index (built from the graph file the store was
loaded from), the other nodes' short edge lists from the endpoint, one round trip per hop (a ``VALUES``
query per direction, sent side by side), and the edges among the chosen nodes from one more round trip.
Its node set equals the in-memory one but for ties in degree, which the endpoint's node ids break in
another order (``same_nodes``, ``node_jaccard_mean``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgwise.errors import KgwiseError
from kgwise.eval.bench.net import rss_mb

if TYPE_CHECKING:
    from kgwise.kg.grounding import Grounder, Grounding
    from kgwise.kg.label_index import BoundIndex
    from kgwise.kg.linking import TextEncoder
    from kgwise.kg.sparql import SPARQLGraph
    from kgwise.types import Question

__all__ = ["LINK_SETS", "choice_recall", "default_links_dir", "endpoint_psub", "run_grounding_benchmark"]


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def choice_recall(exact: Grounder, full: Grounder, questions: Sequence[Question], gold_only: bool,
                  aliases: Grounder | None = None) -> dict[str, Any]:
    """Grounded shares of gold choices (``gold_only``) or of every option, baseline ``exact`` (labels only)
    vs ``full``; ``kept_exact``: of the choices the baseline grounds, the share ``full`` grounds to the same
    nodes (aliases may add a longer match); ``kept_by_fallbacks``: of the choices ``aliases`` (labels and
    aliases, no fallback) grounds, the share ``full`` grounds the same (what the fallbacks change);
    ``methods``: links by method among the choices ``full`` grounds and the baseline does not."""
    n = base = new = kept = base_hits = mid_hits = mid_kept = with_aliases = 0
    methods: dict[str, int] = {}
    for q in questions:
        for c in q.choices:
            if gold_only and c.label not in q.gold:
                continue
            n += 1
            a = exact.ground_choice(c.text)
            links: list[Any] = []
            b = full.ground_choice(c.text, links)
            base += bool(a)
            new += bool(b)
            m = aliases.ground_choice(c.text) if aliases is not None else ()
            with_aliases += bool(m)
            if m:
                mid_hits += 1
                mid_kept += m == b
            if a:
                base_hits += 1
                kept += a == b
            elif b:
                for link in links:
                    methods[link.method] = methods.get(link.method, 0) + 1
    out = {"choices": n, "grounded_exact_only": base / max(n, 1), "grounded_with_fallbacks": new / max(n, 1),
           "kept_exact": kept / max(base_hits, 1), "new_links_by_method": methods}
    if aliases is not None:
        out |= {"grounded_with_aliases": with_aliases / max(n, 1),
                "kept_by_fallbacks": mid_kept / max(mid_hits, 1)}
    return out


def endpoint_psub(sparql: SPARQLGraph, index: BoundIndex, grounding: Grounding) -> tuple[int, ...]:
    """P_sub's node set over an endpoint, with the hub statistics of its bound label index (the extractor
    a pipeline over ``[kg] sparql`` uses); node ids are ``sparql``'s."""
    from kgwise.extract.registry import ExtractorOptions, make_extractor

    extractor = make_extractor("P_sub", sparql, ExtractorOptions(stats=index))
    return extractor.extract(_dummy_question(), grounding).nodes


def _dummy_question() -> Question:
    from kgwise.types import Question

    return Question(id="psub", text="P_sub over an endpoint")


# ------------------------------------------------------------------------------------------ recall parts
def _csqa(data: Path, limit: int | None, progress: Callable[[str], None]) -> dict[str, Any]:
    from kgwise.datasets import load
    from kgwise.kg.benchmarks import DATASET_KGS, build_kg
    from kgwise.kg.grounding import Grounder, GrounderConfig, PhraseIndex
    from kgwise.kg.linking import LinkingConfig

    progress("CSQA ihdev: building the CSQA KG (WordNet + ConceptNet slice)")
    kg = build_kg(DATASET_KGS["csqa"], data)
    qs = load("csqa", "ihdev", data)[:limit]
    wn = data / "wordnet"
    exact = Grounder(kg, GrounderConfig(wordnet_dir=wn), PhraseIndex(kg, aliases=False))
    names = PhraseIndex(kg)
    aliases = Grounder(kg, GrounderConfig(wordnet_dir=wn), names)
    full = Grounder(kg, GrounderConfig(wordnet_dir=wn, linking=LinkingConfig(embedding=False)), names)
    progress(f"CSQA ihdev: grounding {len(qs)} questions' gold choices")
    out = choice_recall(exact, full, qs, gold_only=True, aliases=aliases)
    qs_exact = sum(1 for q in qs if exact.ground_text(q.text))
    return {"questions": len(qs), "kg_nodes": kg.num_nodes, "kg_aliases": len(kg.alias_pairs()[1]),
            **out, "questions_with_question_concepts_exact": qs_exact / max(len(qs), 1)}


def _medqa(data: Path, limit: int, encoder: TextEncoder | None, progress: Callable[[str], None]
           ) -> dict[str, Any]:
    from kgwise.datasets import load
    from kgwise.kg.grounding import Grounder, GrounderConfig, PhraseIndex, embedding_matcher
    from kgwise.kg.linking import LinkingConfig
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data / "ddb")
    qs = load("medqa", "test", data)[:limit]
    exact = Grounder(kg, index=PhraseIndex(kg, aliases=False))
    names = PhraseIndex(kg)
    embedder = None
    if encoder is not None:
        progress("MedQA: encoding DDB names for the embedding fallback (cached per machine)")
        embedder = embedding_matcher(names, encoder)
    full = Grounder(kg, GrounderConfig(linking=LinkingConfig(embedding=encoder is not None)), names, embedder)
    progress(f"MedQA: grounding the options of {len(qs)} questions")
    out = choice_recall(exact, full, qs, gold_only=False, aliases=Grounder(kg, index=names))
    return {"questions": len(qs), "embedding_fallback": encoder is not None, **out}


LINK_SETS: dict[str, str] = {
    "geography": "geography.jsonl",
    "medqa_ddb": "medqa_ddb.jsonl",
    "medqa_ddb_blind": "medqa_ddb_blind.jsonl",
    "medqa_ddb_fresh": "medqa_ddb_fresh.jsonl",
    "medqa_ddb_fresh2": "medqa_ddb_fresh2.jsonl",
    "medqa_ddb_fresh3": "medqa_ddb_fresh3.jsonl",
    "medqa_ddb_fresh4": "medqa_ddb_fresh4.jsonl",
    "medqa_ddb_fresh5": "medqa_ddb_fresh5.jsonl",
    "medqa_ddb_fresh6": "medqa_ddb_fresh6.jsonl",
    "csqa_conceptnet": "csqa_conceptnet.jsonl",
}
"""The labelled link sets and their files (in the links directory)."""

LINK_TARGETS = {"precision": 0.95, "recall": 0.90}
"""Link precision and recall every set must reach with the precise rules."""


def default_links_dir() -> Path | None:
    """``tests/data/links`` of a source checkout, or ``None`` (an installed package ships no sets)."""
    found = Path(__file__).resolve().parents[4] / "tests" / "data" / "links"
    return found if found.is_dir() else None


def _link_graph(name: str, data: Path, links_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The KG of link set ``name`` and what building it found (the geography KG is cleaned as
    ``kgwise kg build`` cleans it)."""
    from kgwise.kg.benchmarks import DATASET_KGS, build_kg
    from kgwise.kg.clean import BuildReport, merge_names
    from kgwise.kg.loaders import load_ddb, load_tsv

    if name == "geography":
        report = BuildReport()
        kg = load_tsv(links_dir / "geography.tsv", aliases=links_dir / "geography_aliases.tsv", report=report)
        kg = merge_names(kg, report)
        return kg, report.counts()
    if name.startswith("medqa_ddb"):
        return load_ddb(data / "ddb"), {}
    return build_kg(DATASET_KGS["csqa"], data), {}


def _links(data: Path, links_dir: Path, encoder: TextEncoder | None, progress: Callable[[str], None],
           sets: Sequence[str] = tuple(LINK_SETS)) -> dict[str, Any]:
    """Each labelled set scored with the earlier rules and the precise ones (same names, same fallbacks:
    fuzzy, and label embeddings where an encoder is given and the KG has under 50,000 names)."""
    from kgwise.eval.bench.linksets import read_link_set, resolve_gold, score_set
    from kgwise.kg.grounding import Grounder, GrounderConfig, PhraseIndex, embedding_matcher
    from kgwise.kg.linking import LinkingConfig

    out: dict[str, Any] = {}
    for name in sets:
        mentions = read_link_set(links_dir / LINK_SETS[name])
        progress(f"links {name}: building the KG")
        kg, build = _link_graph(name, data, links_dir)
        gold = resolve_gold(kg, mentions)
        names = PhraseIndex(kg)
        n_names = kg.num_nodes + len(kg.alias_pairs()[1])
        embedder = None
        if encoder is not None and n_names < 50_000:
            progress(f"links {name}: encoding {n_names:,} names for the embedding fallback (cached)")
            embedder = embedding_matcher(names, encoder)
        linking = LinkingConfig(embedding=embedder is not None)
        earlier = LinkingConfig(embedding=embedder is not None, embedding_min_score=0.8)  # the former default
        wn = data / "wordnet" if name == "csqa_conceptnet" else None
        row: dict[str, Any] = {"kg_nodes": kg.num_nodes, "kg_names": n_names, "build": build,
                               "embedding": embedder is not None,
                               "ambiguous_aliases": len(names.variants.ambiguous)}
        for rules, precise in (("before", False), ("after", True)):
            progress(f"links {name}: {len(mentions)} mentions, {rules}")
            grounder = Grounder(kg, GrounderConfig(wordnet_dir=wn, linking=linking if precise else earlier,
                                                   precise=precise), names, embedder)
            t0 = time.perf_counter()
            row[rules] = score_set(grounder, mentions, gold)
            row[rules]["seconds"] = time.perf_counter() - t0
        out[name] = row
    return out


# ------------------------------------------------------------------------------------------ scale parts
def _synthetic(data: Path, work: Path, nodes: int, edges: int) -> Path:
    from kgwise.eval.bench.synthetic import SyntheticConfig, synthetic_conceptnet, wordnet_words

    path = work / f"synthetic-{nodes}.npz"
    if not path.is_file():
        synthetic_conceptnet(wordnet_words(data / "wordnet"), SyntheticConfig(nodes, edges)).save(path)
    return path


def _stage_questions(data: Path, dataset: str, split: str, limit: int) -> list[Question]:
    """The stage's questions as free text: WebQSP's named topic entities are dropped, so its questions
    are grounded as the pipeline grounds a user's text."""
    import dataclasses

    from kgwise.datasets import load

    return [dataclasses.replace(q, topic_entities=()) for q in load(dataset, split, data)[:limit]]


def _ground_stage(argv: Sequence[str]) -> None:
    """Subprocess: ``ground ENDPOINT INDEX DATA DATASET SPLIT LIMIT OUT`` (grounding over the index, P_sub
    over the endpoint, cold then warm) or ``local GRAPH DATA DATASET SPLIT LIMIT OUT`` (the in-memory CSR
    baseline)."""
    stage = argv[0]
    if stage == "ground":
        endpoint, index_path, data_s, dataset, split, limit_s, out_s = argv[1:]
        from kgwise.extract.registry import ExtractorOptions, make_extractor
        from kgwise.kg.grounding import Grounder, GrounderConfig
        from kgwise.kg.label_index import LabelIndex
        from kgwise.kg.linking import LinkingConfig
        from kgwise.kg.sparql import SPARQLGraph

        qs = _stage_questions(Path(data_s), dataset, split, int(limit_s))
        rss0 = rss_mb()
        sparql = SPARQLGraph(endpoint)
        t0 = time.perf_counter()
        index = LabelIndex(index_path).bind(sparql)
        bind_s = time.perf_counter() - t0
        grounder = Grounder(sparql, GrounderConfig(wordnet_dir=Path(data_s) / "wordnet",
                                                   linking=LinkingConfig(embedding=False)), index)
        extractor = make_extractor("P_sub", sparql, ExtractorOptions(stats=index))
        ground_ms: list[float] = []
        cold_ms: list[float] = []
        warm_ms: list[float] = []
        sets: list[list[str]] = []
        rss_peak = rss_mb()
        for q in qs:
            t0 = time.perf_counter()
            g = grounder.ground(q)
            t1 = time.perf_counter()
            nodes = extractor.extract(q, g).nodes
            t2 = time.perf_counter()
            ground_ms.append((t1 - t0) * 1e3)
            cold_ms.append((t2 - t0) * 1e3)
            sets.append(sorted(sparql.label(v) for v in nodes))
            rss_peak = max(rss_peak, rss_mb())
        requests_cold = sparql.usage()["requests"]
        trips_cold = sparql.round_trips
        for q in qs:
            t0 = time.perf_counter()
            extractor.extract(q, grounder.ground(q))
            warm_ms.append((time.perf_counter() - t0) * 1e3)
        result = {"bind_s": bind_s, "ground_median_ms": _median(ground_ms),
                  "psub_cold_median_ms": _median(cold_ms), "psub_warm_median_ms": _median(warm_ms),
                  "psub_cold_p90_ms": statistics.quantiles(cold_ms, n=10)[-1] if len(cold_ms) > 1 else None,
                  "psub_warm_p90_ms": statistics.quantiles(warm_ms, n=10)[-1] if len(warm_ms) > 1 else None,
                  "requests_per_question_cold": requests_cold / max(len(qs), 1),
                  "round_trips_per_question_cold": trips_cold / max(len(qs), 1),
                  "rss_mb": max(rss_peak, rss_mb()), "rss_growth_mb": rss_mb() - rss0, "node_sets": sets,
                  "endpoint": sparql.usage()}
    elif stage == "local":
        graph_s, data_s, dataset, split, limit_s, out_s = argv[1:]
        from kgwise.extract.subgraph import SubgraphExtractor
        from kgwise.kg.csr import CSRGraph
        from kgwise.kg.grounding import Grounder, GrounderConfig
        from kgwise.kg.linking import LinkingConfig

        qs = _stage_questions(Path(data_s), dataset, split, int(limit_s))
        rss0 = rss_mb()
        graph = CSRGraph.load(graph_s)
        grounder = Grounder(graph, GrounderConfig(wordnet_dir=Path(data_s) / "wordnet",
                                                  linking=LinkingConfig(embedding=False)))
        extractor = SubgraphExtractor(graph)
        ground_ms, total_ms, same = [], [], []
        for q in qs:
            t0 = time.perf_counter()
            g = grounder.ground(q)
            t1 = time.perf_counter()
            sub = extractor.extract(q, g)
            total_ms.append((time.perf_counter() - t0) * 1e3)
            ground_ms.append((t1 - t0) * 1e3)
            same.append(sorted(graph.label(v) for v in sub.nodes))
        result = {"ground_median_ms": _median(ground_ms), "psub_median_ms": _median(total_ms),
                  "rss_mb": rss_mb(), "rss_growth_mb": rss_mb() - rss0, "node_sets": same}
    else:
        raise KgwiseError(f"unknown stage {stage!r}")
    Path(out_s).write_text(json.dumps(result), encoding="utf-8")


def _run(args: list[str], work: Path) -> dict[str, Any]:
    out = work / f"stage-{args[0]}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "kgwise.eval.bench.grounding", *args, str(out)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise KgwiseError(f"benchmark stage {args[0]} failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


STORES = ("virtuoso", "oxigraph")
"""The SPARQL stores the scale parts load the graph into (each skipped with a reason when missing)."""


def _store_available(store: str) -> str | None:
    """Why ``store`` cannot run here, or ``None``."""
    if store == "virtuoso":
        from kgwise.eval.bench.virtuoso import virtuoso_binaries

        return None if virtuoso_binaries() is not None else "virtuoso-t / isql-vt not installed"
    from kgwise.eval.bench.oxigraph import oxigraph_binary

    return None if oxigraph_binary() is not None else "oxigraph not installed (dev extras)"


STORE_MARK = "kgwise-loaded.json"
"""Written into a store's database directory after a complete bulk load when stores are kept: the graph's
content hash and the load time, so a later run over the same work directory reuses the loaded store."""


def _loaded_store(db: Path, content_hash: str) -> float | None:
    """The load time recorded in a kept store at ``db`` loaded from the graph with ``content_hash``, or
    ``None`` (no store there, an unfinished load, or another graph)."""
    mark = db / STORE_MARK
    if not mark.is_file():
        return None
    try:
        found = json.loads(mark.read_text(encoding="utf-8"))
        return float(found["load_s"]) if found["content_hash"] == content_hash else None
    except (ValueError, KeyError, TypeError) as exc:
        raise KgwiseError(f"{mark}: not a store mark written by this benchmark ({exc}); delete {db}") from exc


def _over_store(store: str, nt: Path | None, db: Path, stage: list[str], work: Path, content_hash: str,
                keep: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    """Load ``nt`` into a fresh ``store`` under ``db`` (or, with ``keep``, reuse the store a previous run
    loaded there from the same graph, and keep it afterwards), run the ground stage against it; its report
    with the load time (``store_reused``: the time is the earlier run's)."""
    import shutil

    load_s = _loaded_store(db, content_hash) if keep else None
    reused = load_s is not None
    files: list[Path] = []
    if not reused:
        if nt is None:
            raise KgwiseError(f"no N-Triples export to load {store} from")
        files = [nt]
        shutil.rmtree(db, ignore_errors=True)
    if store == "virtuoso":
        from kgwise.eval.bench.virtuoso import GRAPH_IRI, Virtuoso

        server = Virtuoso(db, memory_mb=3072)
        server.start(timeout_s=600)  # a loaded machine may take minutes to start it
        try:
            if not reused:
                progress(f"  {store}: bulk load (ld_dir + rdf_loader_run)")
                load_s = server.bulk_load(files)
            else:
                progress(f"  {store}: reusing the store loaded in {db}")
            progress(f"  {store}: grounding + P_sub over the endpoint")
            out = _run(["ground", f"{server.endpoint}?default-graph-uri={GRAPH_IRI}", *stage], work)
        finally:
            server.stop()
    else:
        from kgwise.eval.bench.oxigraph import Oxigraph

        ox = Oxigraph(db)
        if not reused:
            progress(f"  {store}: bulk load (oxigraph load)")
            load_s = ox.load(files)
        else:
            progress(f"  {store}: reusing the store loaded in {db}")
        with ox:
            progress(f"  {store}: grounding + P_sub over the endpoint")
            out = _run(["ground", ox.endpoint, *stage], work)
    if keep:
        if not reused:
            (db / STORE_MARK).write_text(json.dumps({"content_hash": content_hash, "load_s": load_s}),
                                         encoding="utf-8")
    else:
        shutil.rmtree(db, ignore_errors=True)
    return {"load_s": load_s, "store_reused": reused, **out}


def _graph_over_stores(name: str, graph: Path, data: Path, work: Path, dataset: str, split: str, limit: int,
                       stores: Sequence[str], keep_stores: bool, progress: Callable[[str], None]
                       ) -> dict[str, Any]:
    """Index ``graph``, ground ``limit`` questions of ``dataset`` in memory (the baseline), then over
    each store of ``stores`` loaded from ``kgwise kg export``'s N-Triples (``keep_stores``: stores loaded
    from this graph by an earlier run over ``work`` are reused, and the loaded ones kept)."""
    from kgwise.kg.csr import CSRGraph
    from kgwise.kg.label_index import build_index
    from kgwise.kg.loaders.ntriples import write_ntriples

    out: dict[str, Any] = {"questions": limit, "dataset": f"{dataset} {split}"}
    progress(f"{name}: label index build from the graph file")
    c0 = time.process_time()
    built = build_index(graph, work / f"{name}.labels.sqlite")
    out |= {"index_build_s": built.seconds, "index_build_cpu_s": time.process_time() - c0,
            "index_names": built.names, "index_mb": built.path.stat().st_size / 2**20}
    progress(f"{name}: in-memory CSR baseline")
    stage = [str(data), dataset, split, str(limit)]
    local = _run(["local", str(graph), *stage], work)
    out["csr"] = {k: v for k, v in local.items() if k != "node_sets"}
    usable = [s for s in stores if _store_available(s) is None]
    for store in stores:
        if store not in usable:
            out[store] = {"skipped": _store_available(store)}
    to_load = [s for s in usable
               if not keep_stores or _loaded_store(work / f"{s}-{name}", built.content_hash) is None]
    nt: Path | None = None
    if usable:
        kg = CSRGraph.load(graph)
        out |= {"nodes": kg.num_nodes, "edges": kg.num_edges}
        if to_load:
            progress(f"{name}: export N-Triples")
            t0 = time.perf_counter()
            nt = write_ntriples(kg, work / f"{name}.nt")
            out["export_s"] = time.perf_counter() - t0
        del kg
    csr_ms = local["psub_median_ms"] or float("nan")
    for store in usable:
        remote = _over_store(store, nt, work / f"{store}-{name}", [str(built.path), *stage], work,
                             built.content_hash, keep_stores, progress)
        pairs = list(zip(local["node_sets"], remote.pop("node_sets"), strict=True))
        remote["same_nodes"] = sum(a == b for a, b in pairs) / max(len(pairs), 1)
        remote["node_jaccard_mean"] = statistics.fmean(
            len(set(a) & set(b)) / len(set(a) | set(b)) if a or b else 1.0 for a, b in pairs
        ) if pairs else None  # two empty sets (a question grounded to nothing either way) agree
        remote["cold_over_csr"] = (remote["psub_cold_median_ms"] or 0) / csr_ms
        remote["warm_over_csr"] = (remote["psub_warm_median_ms"] or 0) / csr_ms
        out[store] = remote
    if nt is not None:
        nt.unlink(missing_ok=True)
    return out


def _scale(data: Path, work: Path, nodes: int, edges: int, limit: int, stores: Sequence[str],
           keep_stores: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    progress(f"scale: synthetic graph of {nodes:,} nodes")
    graph = _synthetic(data, work, nodes, edges)
    return _graph_over_stores(f"synthetic-{nodes}", graph, data, work, "csqa", "ihdev", limit, stores,
                              keep_stores, progress)


def _webqsp(data: Path, work: Path, limit: int, stores: Sequence[str], keep_stores: bool,
            progress: Callable[[str], None]) -> dict[str, Any]:
    from kgwise.kg.loaders import load_tsv

    path = work / "webqsp-freebase.npz"
    if not path.is_file():
        load_tsv(data / "webqsp" / "freebase_fragment.tsv").save(path)
    return _graph_over_stores("webqsp-freebase", path, data, work, "webqsp", "test", limit, stores,
                              keep_stores, progress)


def run_grounding_benchmark(data: Path, work: Path, medqa_limit: int = 200, csqa_limit: int | None = None,
                            scale_nodes: int = 1_600_000, scale_edges: int = 3_400_000,
                            scale_limit: int = 200, stores: Sequence[str] = STORES,
                            encoder: TextEncoder | None = None, keep_stores: bool = False,
                            parts: Sequence[str] = ("links", "csqa", "medqa", "scale", "webqsp"),
                            links_dir: Path | None = None,
                            progress: Callable[[str], None] | None = None,
                            on_result: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the ``parts`` (see the module docstring); ``scale_*``: the synthetic graph's size and the
    questions grounded over it (and over the WebQSP fragment); ``stores``: the SPARQL stores the graphs
    are loaded into (each skipped with a reason when it is not installed); ``keep_stores``: keep each loaded
    store's database under ``work`` and reuse it in a later run over the same ``work`` and graph (its
    bulk load is then not paid again; a store is reused only after a complete load, marked with the graph's
    content hash); ``on_result`` gets the report after each part."""
    say = progress or (lambda _m: None)
    done = on_result or (lambda _r: None)
    bad = [s for s in stores if s not in STORES]
    if bad:
        raise KgwiseError(f"unknown store(s) {bad}; choose from {', '.join(STORES)}")
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    if "links" in parts:
        where = links_dir or default_links_dir()
        if where is None:
            raise KgwiseError("the labelled link sets are in a source checkout's tests/data/links: pass "
                              "--links DIR")
        report["links"] = _links(data, where, encoder, say)
        report["targets"] = _targets(report)
        done(report)
    if "csqa" in parts:
        report["csqa_ihdev"] = _csqa(data, csqa_limit, say)
        done(report)
    if "medqa" in parts:
        report["medqa_ddb"] = _medqa(data, medqa_limit, encoder, say)
        done(report)
    if "scale" in parts:
        report["conceptnet_scale"] = _scale(data, work, scale_nodes, scale_edges, scale_limit, stores,
                                            keep_stores, say)
        done(report)
    if "webqsp" in parts:
        report["webqsp_freebase"] = _webqsp(data, work, scale_limit, stores, keep_stores, say)
        done(report)
    report["targets"] = _targets(report)
    return report


def _targets(r: dict[str, Any]) -> dict[str, Any]:
    """The targets, each with its measured value and the baseline it is read against (the
    ConceptNet-scale ones per store)."""
    t: dict[str, Any] = {}
    for name, row in r.get("links", {}).items():
        after = row["after"]
        t[f"links_{name}"] = {
            "precision": after["precision"], "recall": after["recall"], "in_kg_share": after["in_kg_share"],
            "before": {"precision": row["before"]["precision"], "recall": row["before"]["recall"]},
            "met": after["precision"] >= LINK_TARGETS["precision"] and (after["recall"] or 0.0)
            >= LINK_TARGETS["recall"]}
    c = r.get("csqa_ihdev")
    if c:
        t["csqa_recall_gain"] = {"exact_only": c["grounded_exact_only"],
                                 "with_fallbacks": c["grounded_with_fallbacks"],
                                 "fallbacks_keep_exact": c["kept_by_fallbacks"] == 1.0}
    m = r.get("medqa_ddb")
    if m:
        t["medqa_options_grounded"] = {"before": m["grounded_exact_only"],
                                       "after": m["grounded_with_fallbacks"]}
    s = r.get("conceptnet_scale")
    if s:
        t["index_build_le_120_s"] = {"value": s["index_build_s"], "cpu_s": s["index_build_cpu_s"],
                                     "met": s["index_build_s"] <= 120}
        for store in STORES:
            v = s.get(store)
            if not v or "skipped" in v:
                continue
            csr = s["csr"]["psub_median_ms"]
            t[store] = {
                "label_index_ground_le_20_ms": {"value": v["ground_median_ms"],
                                                "met": v["ground_median_ms"] <= 20},
                "rss_le_300_mb": {"value": v["rss_mb"], "met": v["rss_mb"] <= 300},
                "psub_cold_le_150_ms": {"value": v["psub_cold_median_ms"], "csr_ms": csr,
                                        "met": v["psub_cold_median_ms"] <= 150},
                "psub_warm_le_20_ms": {"value": v["psub_warm_median_ms"], "csr_ms": csr,
                                       "met": v["psub_warm_median_ms"] <= 20}}
    return t


if __name__ == "__main__":
    _ground_stage(sys.argv[1:])
