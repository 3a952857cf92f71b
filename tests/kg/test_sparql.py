"""``SPARQLGraph`` against a real SPARQL 1.1 server on loopback (Oxigraph) serving the WebQSP Freebase
fragment: it reads the same graph as the local loaders, and UAG retrieves the same candidates over it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.errors import ConfigError, KgwiseError
from kgwise.eval.bench.net import free_port
from kgwise.kg import CSRGraph, KnowledgeGraph
from kgwise.kg.grounding import Grounder
from kgwise.kg.loaders import load_ntriples, load_tsv
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.kg.sources import open_graph
from kgwise.kg.sparql import VIRTUOSO_ORDER, XML_RESULTS, SPARQLConfig, SPARQLError, SPARQLGraph
from kgwise.retry import RetryPolicy

NO_WAIT = RetryPolicy(max_retries=1, base_delay_s=0.0, timeout_s=5.0)



@pytest.fixture(scope="module")
def freebase(data_dir: Path) -> CSRGraph:
    return load_tsv(data_dir / "webqsp" / "freebase_fragment.tsv")


@pytest.fixture(scope="module")
def ntriples(freebase: CSRGraph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fragment with a text (an ``rdfs:comment``) on every seventh node."""
    texts = [f"about {lab}" if i % 7 == 0 else "" for i, lab in enumerate(freebase.labels)]
    glossed = CSRGraph.from_arrays(freebase.labels, freebase.relations, *freebase.all_edges(), texts=texts)
    return write_ntriples(glossed, tmp_path_factory.mktemp("rdf") / "freebase.nt")


@pytest.fixture(scope="module")
def endpoint(ntriples: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Oxigraph (a dev dependency) loaded with the fragment and serving it read-only on 127.0.0.1."""
    oxigraph = Path(sys.executable).with_name("oxigraph")
    assert oxigraph.is_file(), f"{oxigraph} missing: install the dev extras (oxigraph)"
    db = tmp_path_factory.mktemp("oxigraph") / "db"
    subprocess.run([str(oxigraph), "load", "--location", str(db), "--file", str(ntriples)], check=True,
                   capture_output=True, timeout=300)
    port = free_port()
    proc = subprocess.Popen([str(oxigraph), "serve-read-only", "--location", str(db), "--bind",
                             f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/query"
    try:
        for _ in range(300):
            try:
                if httpx.post(url, data={"query": "ASK {}"}, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "oxigraph exited"
            time.sleep(0.1)
        else:
            pytest.fail("oxigraph did not start within 30 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _edges(kg: KnowledgeGraph, v: int, out: bool) -> Counter[tuple[str, str]]:
    rels, ends = kg.out_edges(v) if out else kg.in_edges(v)
    return Counter((" ".join(kg.relation_name(int(r)).replace("_", " ").split()), kg.label(int(e)))
                   for r, e in zip(rels, ends, strict=True))


def test_ntriples_export_round_trips(freebase: CSRGraph, ntriples: Path) -> None:
    back = load_ntriples(ntriples)
    assert sorted(back.label(i) for i in range(back.num_nodes)) == sorted(freebase.labels)
    assert back.num_edges == freebase.num_edges
    v = freebase.find("Jamaica")
    assert v is not None
    w = back.find("Jamaica")
    assert w is not None
    assert _edges(back, w, True) == _edges(freebase, v, True)


def test_sparql_graph_reads_the_local_graph(endpoint: str, freebase: CSRGraph) -> None:
    remote = SPARQLGraph(endpoint)
    sample = np.random.default_rng(0).choice(freebase.num_nodes, size=40, replace=False).tolist()
    for v in sample:
        label = freebase.label(v)
        w = remote.find(label)
        assert w is not None, label
        assert remote.label(w) == label
        assert _edges(remote, w, True) == _edges(freebase, v, True), label
        assert _edges(remote, w, False) == _edges(freebase, v, False), label
        assert ({remote.label(int(x)) for x in remote.neighbors([w])}
                == {freebase.label(int(x)) for x in freebase.neighbors([v])})
    assert remote.num_edges == freebase.num_edges
    assert remote.truncated == 0
    # the induced subgraph of a node and its out-neighbours
    v = freebase.find("Jamaica")
    w = remote.find("jamaica")  # normalised lookup: lower case finds the capitalised label
    assert v is not None and w is not None
    nodes_l = np.append(freebase.out_edges(v)[1], v)
    nodes_r = np.append(remote.out_edges(w)[1], w)
    assert len(freebase.edges_among(nodes_l)[0]) == len(remote.edges_among(nodes_r)[0]) > 0
    assert remote.find("no such entity in the fragment") is None
    assert remote.usage()["requests"] > 0


def test_uag_retrieves_the_same_candidates_over_sparql(endpoint: str, freebase: CSRGraph,
                                                       data_dir: Path) -> None:
    from kgwise.conformal.retriever import RetrieverConfig, UQRetriever
    from kgwise.conformal.scores import S1
    from kgwise.datasets import load

    scorer = S1()
    cfg = RetrieverConfig(max_hops=2)
    local, remote = UQRetriever(freebase, scorer, cfg), UQRetriever(SPARQLGraph(endpoint), scorer, cfg)
    compared = 0
    for q in load("webqsp", "test", data_dir)[:12]:
        topics_l, topics_r = local.topic_nodes(q.topic_entities), remote.topic_nodes(q.topic_entities)
        assert [freebase.label(t) for t in topics_l] == [remote.kg.label(t) for t in topics_r]
        if not topics_l:
            continue
        a, b = local.paths(q.text, topics_l), remote.paths(q.text, topics_r)
        assert a.num_states == b.num_states
        assert ({freebase.label(int(n)) for n in a.candidate_nodes()}
                == {remote.kg.label(int(n)) for n in b.candidate_nodes()})
        states_a = sorted((freebase.label(int(n)), round(float(c), 4))
                          for n, c in zip(a.node, a.collect, strict=True))
        states_b = sorted((remote.kg.label(int(n)), round(float(c), 4))
                          for n, c in zip(b.node, b.collect, strict=True))
        assert states_a == states_b
        compared += 1
    assert compared >= 8
    usa = remote.kg.find("United States of America")  # the fragment's hub: all 2,008 out-edges are read
    assert usa is not None and len(remote.kg.out_edges(usa)[1]) == 2008


def test_degree_text_and_p_sub_over_sparql_as_over_the_file(endpoint: str, ntriples: Path) -> None:
    from kgwise.extract import SubgraphConfig, SubgraphExtractor
    from kgwise.kg.grounding import Grounding
    from kgwise.types import Question

    local, remote = load_ntriples(ntriples), SPARQLGraph(endpoint)
    for v in np.random.default_rng(1).choice(local.num_nodes, size=30, replace=False).tolist():
        w = remote.find(local.label(v))
        assert w is not None
        assert remote.text(w) == local.text(v)
        assert remote.degree([w]).tolist() == local.degree([v]).tolist()
    assert sum(bool(local.text(v)) for v in range(local.num_nodes)) > 100
    # caps that never bind, so the store's own ids (which break ties) cannot change what is chosen
    cfg = SubgraphConfig(hops=1, max_nodes=100_000, max_expand=100_000, max_paths=100_000,
                         max_paths_per_pair=100_000)
    psub_l, psub_r = SubgraphExtractor(local, cfg), SubgraphExtractor(remote, cfg)
    for q_label, a_label in [("Jamaica", "Jamaican English"), ("Justin Bieber", "Canada")]:
        sub_l, sub_r = (extractor.extract(Question("q", q_label), Grounding((_node(g, q_label),),
                                                                             ((_node(g, a_label),),)))
                        for extractor, g in ((psub_l, local), (psub_r, remote)))
        assert len(sub_l.nodes) > 2
        assert sorted(local.label(v) for v in sub_l.nodes) == sorted(remote.label(v) for v in sub_r.nodes)
        assert sorted(_label_triples(local, sub_l.edges)) == sorted(_label_triples(remote, sub_r.edges))
        assert (sorted(tuple(local.label(v) for v in p.nodes) for p in sub_l.paths)
                == sorted(tuple(remote.label(v) for v in p.nodes) for p in sub_r.paths))


def _node(kg: KnowledgeGraph, label: str) -> int:
    found = kg.find(label)
    assert found is not None, label
    return found


def _label_triples(kg: KnowledgeGraph, edges: tuple[tuple[int, int, int], ...]) -> list[tuple[str, str, str]]:
    return [(kg.label(h), kg.relation_name(r), kg.label(t)) for h, r, t in edges]


def test_hub_edges_are_cut_at_max_edges(endpoint: str, freebase: CSRGraph) -> None:
    hub = max(range(freebase.num_nodes), key=lambda v: len(freebase.out_edges(v)[1]))
    remote = SPARQLGraph(endpoint, SPARQLConfig(max_edges=3))
    w = remote.find(freebase.label(hub))
    assert w is not None and len(freebase.out_edges(hub)[1]) > 3
    assert len(remote.out_edges(w)[1]) == 3
    assert remote.usage()["truncated_edge_lists"] == 1
    assert remote.label(w) == freebase.label(hub)  # its label is asked for, not taken from a cut list


def test_endpoint_errors_name_the_endpoint_and_the_query(endpoint: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}/query"
    with pytest.raises(SPARQLError, match=r"gave up after 2 attempts: connection: http://127\.0\.0\.1"):
        SPARQLGraph(dead, SPARQLConfig(retry=NO_WAIT)).find("Jamaica")
    with pytest.raises(SPARQLError, match=r"HTTP 400 .*query: SELECT nonsense"):
        SPARQLGraph(endpoint, SPARQLConfig(retry=NO_WAIT)).select("SELECT nonsense")
    not_sparql = endpoint.rsplit("/", 1)[0] + "/no-such-service"
    with pytest.raises(SPARQLError, match="HTTP 4"):
        SPARQLGraph(not_sparql, SPARQLConfig(retry=NO_WAIT)).find("Jamaica")
    with pytest.raises(ConfigError, match="http"):
        SPARQLGraph("ftp://example.org/sparql")
    with pytest.raises(ConfigError, match="grounding free text"):
        Grounder(SPARQLGraph(endpoint))
    from kgwise.kg.label_index import open_index

    with pytest.raises(KgwiseError, match="label index not found"):
        open_index(SPARQLGraph(endpoint), "no-such.idx")
    with pytest.raises(ConfigError, match="not seen"):
        SPARQLGraph(endpoint).out_edges(0)


def test_graph_specs_and_cli(endpoint: str, ntriples: Path) -> None:
    assert isinstance(open_graph(f"sparql:{endpoint}"), SPARQLGraph)
    assert isinstance(open_graph(endpoint), SPARQLGraph)
    assert isinstance(open_graph(str(ntriples)), CSRGraph)
    res = CliRunner().invoke(app, ["kg", "neighbors", f"sparql:{endpoint}", "Jamaica", "--limit", "3"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("Jamaica") and "-[" in res.output
    res = CliRunner().invoke(app, ["kg", "neighbors", endpoint, "no such entity in the fragment"])
    assert res.exit_code != 0 and "no node labelled" in res.output


def test_uag_evaluates_over_sparql_as_over_the_file(endpoint: str, data_dir: Path, tmp_path: Path) -> None:
    """`kgwise eval uag` on 120 real WebQSP questions with RoG's recorded answers: the endpoint gives every
    figure the TSV file gives."""
    import json

    from kgwise.eval.uag.experiment import load_webqsp_data

    wq = load_webqsp_data(data_dir, limit=120)
    questions, generations = tmp_path / "questions.jsonl", tmp_path / "generations.jsonl"
    questions.write_text("".join(json.dumps({"id": q.id, "text": q.text, "gold": list(q.gold),
                                             "topic_entities": list(q.topic_entities)}) + "\n"
                                 for q in wq.questions), encoding="utf-8")
    assert wq.generations is not None
    generations.write_text("".join(json.dumps({"id": q.id, "answer": wq.generations[q.id]}) + "\n"
                                   for q in wq.questions), encoding="utf-8")
    results = {}
    specs = {"file": str(data_dir / "webqsp" / "freebase_fragment.tsv"), "sparql": f"sparql:{endpoint}"}
    for name, kg in specs.items():
        report = tmp_path / f"{name}.json"
        res = CliRunner().invoke(app, ["eval", "uag", "--kg", kg, "--questions", str(questions),
                                       "--generations", str(generations), "--alphas", "0.4", "--splits", "2",
                                       "--json", str(report)])
        assert res.exit_code == 0, res.output
        results[name] = {k: v for k, v in json.loads(report.read_text()).items()
                         if k not in ("meta", "table6_markdown", "plots")}
    assert results["sparql"] == results["file"] and results["file"]["uag"]["0.4"]["ecr"] is not None


def test_bench_sparql_walks_agree(endpoint: str, data_dir: Path, tmp_path: Path) -> None:
    import json

    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "sparql", "--endpoint", endpoint, "--kg",
                                   str(data_dir / "webqsp" / "freebase_fragment.tsv"), "--limit", "5",
                                   "--data", str(data_dir), "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["questions"] == report["agree"] == 5 and report["edges_read"] > 0
    assert report["endpoint"]["failures"] == 0 and report["cold_over_local"] > 0


@pytest.fixture(scope="module")
def freebase_index(freebase: CSRGraph, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A label index of the fragment's graph file (with P_sub's hub statistics)."""
    from kgwise.kg.label_index import build_index

    root = tmp_path_factory.mktemp("index")
    return build_index(freebase.save(root / "fb.npz"), root / "fb.idx").path


def test_psub_over_the_endpoint_uses_the_index_statistics(endpoint: str, freebase: CSRGraph,
                                                          freebase_index: Path) -> None:
    from kgwise.extract.neighbourhood import CappedNeighbours, IndexedNeighbours
    from kgwise.kg.label_index import LabelIndex

    remote = SPARQLGraph(endpoint)
    bound = LabelIndex(freebase_index).bind(remote)
    local = CappedNeighbours(freebase, 100)
    hubs = np.argsort(-local.degree)[:4].tolist()
    assert local.degree[hubs[0]] > 100  # the fragment has hubs: their lists come from the index
    sample = hubs + np.random.default_rng(1).choice(freebase.num_nodes, size=30, replace=False).tolist()
    ids = [remote.node_of_iri(f"urn:kgwise:node:{v}") for v in sample]
    rule = IndexedNeighbours(remote, bound, 100)
    sent, trips = remote.usage()["requests"], remote.round_trips
    assert rule.degree_of(np.asarray(ids)).tolist() == local.degree[sample].tolist()
    pos, nbr = rule.expand(ids)
    # every short list in one VALUES query per direction, sent side by side; no hub list
    assert (remote.usage()["requests"] - sent, remote.round_trips - trips) == (2, 1)
    for i, v in enumerate(sample):
        assert ({remote.label(int(x)) for x in nbr[pos == i]}
                == {freebase.label(int(x)) for x in local.neighbours(v)}), freebase.label(v)
    # the edges among a hub, its capped neighbours and the sample, without reading the hub's list
    chosen_l = np.unique(np.concatenate([np.asarray(sample), local.neighbours(hubs[0])]))
    chosen_r = np.unique(np.concatenate([np.asarray(ids), nbr[pos == 0]]))
    h, _, t = freebase.edges_among(chosen_l)
    hr, _, tr = rule.edges_among(chosen_r)
    pairs_l = Counter((freebase.label(int(x)), freebase.label(int(y))) for x, y in zip(h, t, strict=True))
    pairs_r = Counter((remote.label(int(x)), remote.label(int(y))) for x, y in zip(hr, tr, strict=True))
    assert pairs_l == pairs_r and sum(pairs_l.values()) > 0
    assert remote.truncated == 0


def test_psub_over_the_endpoint_matches_the_graph_file(endpoint: str, freebase: CSRGraph,
                                                        freebase_index: Path) -> None:
    from kgwise.extract.registry import ExtractorOptions, make_extractor
    from kgwise.kg.grounding import Grounder
    from kgwise.kg.label_index import LabelIndex
    from kgwise.types import make_question

    remote = SPARQLGraph(endpoint)
    bound = LabelIndex(freebase_index).bind(remote)
    q = make_question("what currency does jamaica use", ["Jamaican dollar", "Euro"])
    g_l, g_r = Grounder(freebase).ground(q), Grounder(remote, index=bound).ground(q)
    assert [freebase.label(v) for v in g_l.question_nodes] == [remote.label(v) for v in g_r.question_nodes]
    sub_l = make_extractor("P_sub", freebase).extract(q, g_l)
    extractor = make_extractor("P_sub", remote, ExtractorOptions(stats=bound))
    sent, trips = remote.usage()["requests"], remote.round_trips
    sub_r = extractor.extract(q, g_r)
    assert remote.round_trips - trips <= 3  # one round trip per hop, one for the edges among
    assert remote.usage()["requests"] - sent <= 8  # out- and in-lists side by side, and the hub pairs
    # ties in degree break by the graph file's ids (the index's), so the endpoint gives the same nodes
    assert [freebase.label(v) for v in sub_l.nodes] == [remote.label(v) for v in sub_r.nodes]
    sent = remote.usage()["requests"]
    assert extractor.extract(q, g_r).nodes == sub_r.nodes
    assert remote.usage()["requests"] == sent  # warm: every list is kept


def test_an_index_of_another_graph_is_refused_by_the_endpoint(endpoint: str, tmp_path: Path) -> None:
    from kgwise.kg.label_index import LabelIndex, build_index

    other = CSRGraph.from_triples([("Jamaica", "r", "b")]).save(tmp_path / "o.npz")
    with pytest.raises(ConfigError, match="another graph"):
        LabelIndex(build_index(other, tmp_path / "o.idx").path).bind(SPARQLGraph(endpoint))


def test_xml_results_read_the_same_graph_as_json(endpoint: str, freebase: CSRGraph) -> None:
    """Oxigraph asked for SPARQL XML results (what a Virtuoso endpoint is asked for) reads what JSON reads:
    IRIs, plain, language-tagged and typed literals."""
    as_json = SPARQLGraph(endpoint)
    as_xml = SPARQLGraph(endpoint, client=httpx.Client(headers={"Accept": XML_RESULTS}, timeout=30))
    for label in ("Jamaica", "Jamaican dollar", "English Language"):
        a, b = as_json.find(label), as_xml.find(label)
        assert a is not None and b is not None and as_xml.label(b) == label
        for out in (True, False):
            assert _edges(as_xml, b, out) == _edges(as_json, a, out)
    rows = as_xml.select('SELECT ?a ?b ?c WHERE { BIND("x"@en AS ?a) BIND(3 AS ?b) BIND(<urn:y> AS ?c) }')
    assert rows == [{"a": {"type": "literal", "value": "x", "xml:lang": "en"},
                     "b": {"type": "literal", "value": "3",
                           "datatype": "http://www.w3.org/2001/XMLSchema#integer"},
                     "c": {"type": "uri", "value": "urn:y"}}]


def test_a_virtuoso_endpoint_is_asked_for_xml_and_pair_queries_keep_their_join_order() -> None:
    """A stub endpoint that names itself Virtuoso: after its first (JSON) reply the client asks for XML, and
    the queries for the edges between two hubs carry Virtuoso's join-order pragma; malformed XML fails
    clearly."""
    seen: list[tuple[str, str]] = []
    ns = "http://www.w3.org/2005/sparql-results#"
    xml_row = (f'<?xml version="1.0"?><sparql xmlns="{ns}"><head><variable name="h"/><variable name="p"/>'
               '<variable name="t"/></head><results><result><binding name="h"><uri>urn:a</uri></binding>'
               '<binding name="p"><uri>urn:r</uri></binding><binding name="t"><uri>urn:b</uri></binding>'
               '</result></results></sparql>')
    broken = ["no"]

    def handler(request: httpx.Request) -> httpx.Response:
        query = dict(httpx.QueryParams(request.content.decode()))["query"]
        accept = request.headers.get("accept", "")
        seen.append((accept, query))
        server = {"Server": "Virtuoso/07.20.3229 (Linux) x86_64-pc-linux-gnu"}
        if XML_RESULTS not in accept:
            empty = {"head": {"vars": []}, "results": {"bindings": [{}]}}
            return httpx.Response(200, headers=server, json=empty)
        body = "<sparql><oops" if broken[0] == "yes" else xml_row
        return httpx.Response(200, headers={**server, "Content-Type": XML_RESULTS}, text=body)

    kg = SPARQLGraph("http://stub.invalid/sparql", SPARQLConfig(retry=NO_WAIT),
                     client=httpx.Client(transport=httpx.MockTransport(handler)))
    a, b = kg.node_of_iri("urn:a", "A"), kg.node_of_iri("urn:b", "B")
    h, r, t = kg.edges_among([a, b], large={a, b})
    assert (h.tolist(), t.tolist(), kg.relation_name(int(r[0]))) == ([a], [b], "r")
    assert kg.is_virtuoso()
    assert XML_RESULTS not in seen[0][0]  # the first request learns who answers
    assert seen[-1][0] == XML_RESULTS and seen[-1][1].startswith(VIRTUOSO_ORDER)
    broken[0] = "yes"
    with pytest.raises(SPARQLError, match="not SPARQL XML results"):
        kg.select("SELECT ?x WHERE { ?x ?p ?o }")


def test_a_malformed_or_slow_endpoint_fails_clearly() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.startswith("/slow"):
                time.sleep(3)
            body = b"<html>not SPARQL</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(SPARQLError, match="not SPARQL JSON results"):
            SPARQLGraph(f"{base}/query", SPARQLConfig(retry=NO_WAIT)).find("Jamaica")
        quick = RetryPolicy(max_retries=1, base_delay_s=0.0, timeout_s=0.5)
        t0 = time.perf_counter()
        with pytest.raises(SPARQLError, match="gave up after 2 attempts"):
            SPARQLGraph(f"{base}/slow", SPARQLConfig(retry=quick)).find("Jamaica")
        assert time.perf_counter() - t0 < 5  # a timeout on every request: never a hang
    finally:
        server.shutdown()


def test_an_endpoint_without_an_index_gets_one_built_and_cached(endpoint: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from kgwise.kg.label_index import open_index

    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path))
    said: list[str] = []
    remote = SPARQLGraph(endpoint)
    bound = open_index(remote, progress=said.append)
    assert any("building the label index" in m for m in said)
    hit = bound.lookup("jamaica")
    assert hit is not None and remote.label(hit[0]) == "Jamaica"
    assert bound.hub_cap is None  # names from the endpoint: no P_sub statistics
    said.clear()
    again = open_index(SPARQLGraph(endpoint), progress=said.append)
    assert not said and again.index.path == bound.index.path  # reused, not rebuilt


@pytest.mark.slow
def test_the_pipeline_answers_over_an_endpoint_with_a_label_index(endpoint: str, freebase_index: Path,
                                                                   tmp_path: Path) -> None:
    from kgwise.app import Pipeline

    config = tmp_path / "kgwise.toml"
    config.write_text(f'[kg]\nsparql = "{endpoint}"\nindex = "{freebase_index}"\n[[arms]]\nname = "kg"\n'
                      'kind = "inject"\nspec = "smollm2-135m"\ncombo = "P_sub+F_t"\n[router]\n'
                      'budget_calls = 10\n', encoding="utf-8")
    with Pipeline.from_config(config, tmp_path / "state") as pipe:
        result = pipe.answer("What currency does Jamaica use?", ["Jamaican dollar", "Euro"])
        evidence = pipe.evidence("What currency does Jamaica use?", ["Jamaican dollar", "Euro"])
    assert "Jamaica" in result.question_entities  # grounded through the index
    assert result.knowledge.triples and any("Jamaica" in (t.head, t.tail) for t in result.knowledge.triples)
    assert evidence.triples == result.knowledge.triples  # what the arm read, read from the endpoint


def test_an_index_built_from_the_endpoint_keeps_the_hub_statistics(endpoint: str, freebase: CSRGraph,
                                                                   tmp_path: Path) -> None:
    from kgwise.extract.neighbourhood import CappedNeighbours, IndexedNeighbours
    from kgwise.kg.label_index import HUB_CAP, LabelIndex, build_index

    idx = LabelIndex(build_index(f"sparql:{endpoint}", tmp_path / "ep.idx", hub_stats=True).path)
    assert idx.hub_cap == HUB_CAP
    local = CappedNeighbours(freebase, HUB_CAP)
    terms = [f"urn:kgwise:node:{v}" for v in range(freebase.num_nodes)]
    ids = idx.nodes_of_terms(terms)
    rows = idx.rows(ids.values())
    assert [rows[ids[t]][2] for t in terms] == local.degree.tolist()  # every degree, read in pages
    hubs = np.flatnonzero(local.degree > HUB_CAP).tolist()
    assert hubs
    for v in hubs:  # capN by (degree, the index's id): the endpoint's order of ids, not the file's
        adjacent = [ids[terms[x]] for x in np.unique(freebase.neighbors([v])).tolist() if x != v]
        want = sorted(adjacent, key=lambda i: (rows[i][2] or 0, i))[:HUB_CAP]
        got = idx.hub(ids[terms[v]])
        assert got is not None and got.tolist() == want
    # P_sub over the endpoint with those statistics reads no hub's list
    remote = SPARQLGraph(endpoint)
    rule = IndexedNeighbours(remote, idx.bind(remote), HUB_CAP)
    sample = [remote.node_of_iri(terms[v]) for v in hubs[:3]]
    sent = remote.usage()["requests"]
    pos, nbr = rule.expand(sample)
    assert remote.usage()["requests"] == sent  # hubs only: every list from the index
    for i, v in enumerate(hubs[:3]):
        stored = idx.hub(ids[terms[v]])
        assert stored is not None
        assert {remote.iri(int(x)) for x in nbr[pos == i]} == {idx.term(int(x)) for x in stored.tolist()}
