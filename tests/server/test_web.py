"""The web page and the offline docs in a real browser: Playwright for Python driving Debian's Chromium,
headless, against a real uvicorn on 127.0.0.1. Every request the page or the docs make is checked: one to
any host other than 127.0.0.1 fails the test. Screenshots go to a temporary folder (or
``$KGWISE_TEST_ARTEFACTS`` when set) and their paths are printed."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from kgwise.server import ServerSettings, create_app
from kgwise.types import Triple

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
QUESTION = "Which medication is commonly prescribed to treat hypertension?"
CHOICES = ["Lisinopril", "Insulin", "Penicillin"]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium; .ci/install does)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("KGWISE_TEST_ARTEFACTS")
    out = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


class Page:
    """A browser page that records every request and refuses (and remembers) any not to 127.0.0.1."""

    def __init__(self, browser: Any, artefacts: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.foreign: list[str] = []
        self.requests: list[Any] = []
        self.artefacts = artefacts
        self.context.route("**/*", self._guard)
        self.page = self.context.new_page()
        self.page.on("requestfinished", lambda request: self.requests.append(request))
        self.page.set_default_timeout(15_000)

    def _guard(self, route: Any) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob") or parts.hostname == "127.0.0.1":
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort()

    def shot(self, name: str, full_page: bool = True) -> Path:
        path = self.artefacts / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        print(f"screenshot: {path}")
        return path

    def close(self) -> None:
        self.context.close()
        assert not self.foreign, f"requests left 127.0.0.1: {self.foreign}"


@pytest.fixture
def page(browser: Any, artefacts: Path) -> Iterator[Page]:
    p = Page(browser, artefacts)
    yield p
    p.close()


def _ask(pg: Any, question: str, choices: list[str], model: str = "kgwise") -> dict[str, Any]:
    pg.fill("#question", question)
    pg.fill("#choices", "\n".join(choices))
    pg.select_option("#model", model)
    before = pg.evaluate("() => window.kgwise.extra && window.kgwise.extra.decision_id")
    pg.click("#ask")
    pg.wait_for_function("(d) => window.kgwise.extra && window.kgwise.extra.decision_id !== d", arg=before)
    return dict(pg.evaluate("() => window.kgwise.extra"))


def _router_row(pg: Any, arm: str) -> dict[str, str]:
    row = pg.locator(f"table.arms tr[data-arm='{arm}']")
    cells = ("selections", "graded", "accuracy", "calibration")
    return {k: row.locator(f"td.{k}").inner_text() for k in cells}


def _open_router(pg: Any) -> None:
    stamp = pg.evaluate("() => document.getElementById('pipelines').dataset.loaded || ''")
    pg.click("#tab-router")
    pg.wait_for_function("(s) => (document.getElementById('pipelines').dataset.loaded || '') !== s",
                         arg=stamp)


def test_ask_graph_feedback_and_router_counts(live: Any, page: Page) -> None:
    pg = page.page
    t0 = time.monotonic()
    pg.goto(live.url + "/")
    pg.wait_for_function("() => document.querySelectorAll('#model option').length > 0")
    ready_s = time.monotonic() - t0
    models = pg.eval_on_selector_all("#model option", "os => os.map(o => o.value)")
    assert models[0] == "kgwise" and any(m.startswith("kgwise/") for m in models)
    nav = pg.evaluate("() => { const n = performance.getEntriesByType('navigation')[0]; "
                      "return [n.domInteractive, n.loadEventEnd]; }")
    sizes = [r.sizes() for r in page.requests]
    first_load = sum(z["responseBodySize"] + z["responseHeadersSize"] for z in sizes)
    print(f"first load: {len(sizes)} requests, {first_load} bytes transferred; DOM interactive "
          f"{nav[0]:.0f} ms, load event {nav[1]:.0f} ms, models listed {ready_s:.2f} s after goto")
    assert first_load <= 1_000_000

    extra = _ask(pg, QUESTION, CHOICES)
    pg.wait_for_selector("#result:not([hidden])")
    assert pg.inner_text("#answer") == f"{extra['choice']}) {extra['answer']}"
    assert pg.inner_text("#arm").startswith(extra["arm"])
    rows = pg.eval_on_selector_all("#scores tbody tr", "rs => rs.map(r => r.dataset.arm)")
    assert sorted(rows) == sorted(extra["scores"])
    if extra["answer_set"] is not None:
        assert extra["answer_set"]["guarantee"] in pg.inner_text("#set")
    # the graph holds every evidence element: concepts, choices, triples and path hops with their relations
    ev = extra["evidence"]
    assert ev is not None
    nodes = set(pg.evaluate("() => window.kgwise.cy.nodes().map(n => n.data('label'))"))
    edges = {tuple(e) for e in pg.evaluate(
        "() => window.kgwise.cy.edges().map(e => [e.source().data('label'), e.data('label'), "
        "e.target().data('label')])")}
    want_nodes = set(ev["question_concepts"]) | {f"{c['label']}) {c['text']}" for c in extra["choices"]}
    want_nodes |= {x for t in ev["triples"] for x in (t["head"], t["tail"])}
    want_nodes |= {n for p in ev["paths"] for n in p["nodes"]}
    assert want_nodes <= nodes, want_nodes - nodes
    want_edges = {(t["head"], t["relation"], t["tail"]) for t in ev["triples"]}
    for p in ev["paths"]:
        for i, r in enumerate(p["relations"]):
            a, b = p["nodes"][i], p["nodes"][i + 1]
            want_edges.add((b, r, a) if p["inverse"][i] else (a, r, b))
    assert want_edges <= edges, want_edges - edges
    chosen = pg.evaluate("() => window.kgwise.cy.nodes('.chosen').map(n => n.data('label'))")
    assert chosen == [f"{extra['choice']}) {extra['answer']}"]
    page.shot("ask")

    _open_router(pg)
    row = _router_row(pg, extra["arm"])
    assert int(row["selections"]) >= 1
    status = {a["name"]: a for a in httpx.get(live.url + "/v1/status").json()["pipelines"][0]["arms"]}
    questions = status[extra["arm"]]["calibration_questions"]
    want = "no calibration" if questions is None else f"{questions} held-out questions"
    assert row["calibration"] == want
    graded = int(row["graded"])
    assert pg.locator(f"tr[data-decision='{extra['decision_id']}']").count() == 1

    pg.click("#tab-ask")
    pg.click("#fb-correct")
    pg.wait_for_function("() => document.getElementById('fb-done').textContent.startsWith('recorded')")
    _open_router(pg)
    assert int(_router_row(pg, extra["arm"])["graded"]) == graded + 1
    assert pg.locator(f"tr[data-decision='{extra['decision_id']}']").count() == 0

    # one-click feedback from the router page's pending list
    pg.click("#tab-ask")
    second = _ask(pg, "Which hormone do people with type 1 diabetes need?", ["Insulin", "Cortisol"])
    _open_router(pg)
    arm_graded = int(_router_row(pg, second["arm"])["graded"])
    row = pg.locator(f"tr[data-decision='{second['decision_id']}']")
    stamp = pg.evaluate("() => document.getElementById('pipelines').dataset.loaded")
    row.locator("button.bad").click()
    pg.wait_for_function("(s) => document.getElementById('pipelines').dataset.loaded !== s", arg=stamp)
    assert int(_router_row(pg, second["arm"])["graded"]) == arm_graded + 1
    assert pg.locator(f"tr[data-decision='{second['decision_id']}']").count() == 0
    assert pg.locator("svg.chart path").count() == 1 or live.pipeline.status().spent == 0
    page.shot("router")

    # an open question: no choice nodes, the grounded concepts still drawn
    pg.click("#tab-ask")
    open_q = _ask(pg, "What drug lowers blood pressure in hypertension?", [])
    assert open_q["choices"] is None and pg.inner_text("#answer") == open_q["answer"]
    labels = set(pg.evaluate("() => window.kgwise.cy.nodes().map(n => n.data('label'))"))
    assert set(open_q["evidence"]["question_concepts"]) <= labels
    assert pg.evaluate("() => window.kgwise.cy.nodes('.ch').length") == 0
    page.shot("ask-open")


def test_docs_and_redoc_render_offline(live: Any, page: Page) -> None:
    pg = page.page
    pg.goto(live.url + "/docs")
    pg.wait_for_selector(".opblock")
    paths = pg.eval_on_selector_all(".opblock-summary-path", "ps => ps.map(p => p.textContent)")
    for path in ("/v1/chat/completions", "/v1/models", "/v1/feedback", "/v1/status"):
        assert any(path in p for p in paths), (path, paths)
    page.shot("docs")
    pg.goto(live.url + "/redoc")
    pg.get_by_text("/v1/chat/completions").first.wait_for()
    assert pg.locator("h2", has_text="Chat Completions").count() >= 1
    page.shot("redoc", full_page=False)


def test_empty_states(fake_pipeline: Any, serve_pipelines: Any, page: Page) -> None:
    pipeline = fake_pipeline(budget=None, alpha=None)
    with serve_pipelines({"kgwise": pipeline}) as url:
        pg = page.page
        pg.goto(url + "/#router")
        pg.wait_for_selector("section.pipeline")
        text = pg.inner_text("#pipelines")
        assert "No router budget is configured" in text and "No calibration" in text
        assert "No decision is waiting for feedback." in text
        assert "No spending since this server started" in text
        page.shot("router-empty")
        pg.click("#tab-ask")
        _ask(pg, QUESTION, CHOICES, model="kgwise/kgm")
        assert "No calibrated set" in pg.inner_text("#set")
    with serve_pipelines({}, app=_no_pipeline_app()) as url:
        pg.goto(url + "/")
        pg.wait_for_selector("#no-pipeline:not([hidden])")
        assert "serves no pipeline" in pg.inner_text("#no-pipeline")


def _no_pipeline_app() -> Any:
    """A server without pipelines (a UAG-only or router-only one looks the same to the page)."""
    from fastapi import FastAPI

    from kgwise.server.docs import install_docs
    from kgwise.server.web import install_web

    app = FastAPI(docs_url=None, redoc_url=None)
    install_docs(app)
    install_web(app)
    return app


class StubKeyCheck:
    """A stand-in for the hardening issue's API keys: ``/v1/*`` needs ``Authorization: Bearer <key>``."""

    def __init__(self, app: Any, key: str) -> None:
        self.app, self.key = app, key

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            if auth != f"Bearer {self.key}":
                body = b'{"error": {"message": "API key required", "type": "authentication_error", ' \
                       b'"param": null, "code": "invalid_api_key"}}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def test_page_asks_for_a_key_on_401(fake_pipeline: Any, serve_pipelines: Any, page: Page) -> None:
    app = StubKeyCheck(create_app(ServerSettings(), pipelines={"kgwise": fake_pipeline()}), "s3cret")
    with serve_pipelines({}, app=app) as url:
        pg = page.page
        pg.goto(url + "/")
        pg.wait_for_selector("#key-dialog[open]")
        page.shot("api-key")
        pg.fill("#key-input", "wrong")
        pg.click("#key-save")
        pg.wait_for_selector("#key-dialog[open]")  # refused: asked again
        pg.fill("#key-input", "s3cret")
        pg.click("#key-save")
        pg.wait_for_function("() => document.querySelectorAll('#model option').length > 0")
        extra = _ask(pg, QUESTION, CHOICES)
        assert extra["decision_id"]
        auth = {r.headers.get("authorization") for r in page.requests if "/v1/chat/completions" in r.url}
        assert auth == {"Bearer s3cret"}


GEOGRAPHY = (("douala", "is in", "cameroon"), ("yaounde", "is in", "cameroon"),
             ("garoua", "is in", "cameroon"), ("lagos", "is in", "nigeria"), ("abuja", "is in", "nigeria"),
             ("lyon", "is in", "france"), ("cameroon", "borders", "nigeria"), ("cameroon", "borders", "chad"),
             ("france", "borders", "spain"))


def test_example_questions_come_from_the_served_kg(tmp_path: Path, fake_pipeline: Any, serve_pipelines: Any,
                                                   page: Page) -> None:
    """The page's placeholder and example buttons are questions made from the served pipeline's KG (a
    small geography graph here), not a fixed domain's; a pipeline that offers none leaves them neutral."""
    from kgwise.app.config import starter_toml
    from kgwise.server.pipeline_adapter import ServedPipeline

    (tmp_path / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in GEOGRAPHY), encoding="utf-8")
    toml = starter_toml("kg.tsv", [("a", "external", "", 0.1)], budget_usd=1.0)
    (tmp_path / "kgwise.toml").write_text(toml, encoding="utf-8")
    pipeline = ServedPipeline.from_config(tmp_path / "kgwise.toml", tmp_path / "state")
    labels = {x for triple in GEOGRAPHY for x in (triple[0], triple[2])}
    pg = page.page
    try:
        with serve_pipelines({"kgwise": pipeline}) as url:
            served = httpx.get(url + "/v1/examples").json()["examples"]
            assert served and all(set(x["choices"]) <= labels for x in served)
            assert served[0] == {"question": "What is in cameroon?", "choices": ["abuja", "douala", "lagos"]}
            pg.goto(url + "/")
            pg.wait_for_selector("#examples:not([hidden])")
            assert pg.get_attribute("#question", "placeholder") == served[0]["question"]
            assert pg.get_attribute("#choices", "placeholder") == "\n".join(served[0]["choices"])
            buttons = pg.locator("#examples button.example")
            assert buttons.all_inner_texts() == [x["question"] for x in served]
            buttons.last.click()
            assert pg.input_value("#question") == served[-1]["question"]
            assert pg.input_value("#choices").splitlines() == served[-1]["choices"]
            page.shot("examples")
    finally:
        pipeline.close()
    with serve_pipelines({"kgwise": fake_pipeline()}) as url:  # a test double offers no examples
        pg.goto(url + "/")
        pg.wait_for_function("() => window.kgwise.examples !== undefined")
        assert pg.is_hidden("#examples")
        assert "knowledge graph" in (pg.get_attribute("#question", "placeholder") or "")


def _chain(nodes: tuple[str, ...], relations: tuple[str, ...], inverse: tuple[bool, ...]
           ) -> tuple[Triple, ...]:
    """A path by label as the chain of stored facts an answer's knowledge holds (hop ``i`` inverse: the
    fact is ``nodes[i+1] -relations[i]-> nodes[i]``)."""
    return tuple(Triple(b, r, a) if inv else Triple(a, r, b)
                 for a, b, r, inv in zip(nodes[:-1], nodes[1:], relations, inverse, strict=True))


def _large_evidence(pipeline: Any) -> Any:
    """``pipeline`` (the fake of conftest) whose answers carry the evidence of a large P_sub: 3 choices,
    15 two-hop paths to each, 60 more facts (about 110 concepts), and two supporting paths to the chosen
    answer, the second walked against its edge."""

    class Large(pipeline):
        def answer(self, text: str, choices: list[str] | None = None, arm: str | None = None,
                   **kw: Any) -> Any:
            r = super().answer(text, choices, arm, **kw)
            assert choices is not None and r.label is not None
            ends = [c.lower() for c in choices]
            paths = tuple(_chain(("hypertension", f"via {i}-{k}", ends[i]), ("linked to", "treated by"),
                                 (False, False)) for k in range(15) for i in range(len(ends)))
            chosen = ends["ABC".index(r.label)]
            support = (_chain(("hypertension", "blood pressure", chosen), ("has finding", "lowered by"),
                              (False, True)),
                       _chain(("hypertension", chosen), ("treated by",), (False,)))
            facts = tuple(Triple(f"fact {k}", "related to", f"other {k}") for k in range(60))
            triples = (*facts, *(p[0] for p in paths),
                       Triple("hypertension", "has finding", "blood pressure"),
                       Triple(chosen, "lowered by", "blood pressure"),
                       Triple("hypertension", "treated by", chosen))
            knowledge = replace(r.knowledge, triples=triples, paths=(*support, *paths), support=support)
            return replace(r, question_entities=("hypertension",), choice_entities=tuple((e,) for e in ends),
                           knowledge=knowledge)

    return Large()


def test_a_large_evidence_graph_shows_its_best_nodes_and_highlights_the_support(
        fake_pipeline: Any, serve_pipelines: Any, page: Page) -> None:
    with serve_pipelines({"kgwise": _large_evidence(fake_pipeline)}) as url:
        pg = page.page
        pg.goto(url + "/")
        pg.wait_for_function("() => document.querySelectorAll('#model option').length > 0")
        extra = _ask(pg, QUESTION, CHOICES)
        ev = extra["evidence"]
        total = len({*ev["question_concepts"], *(c for cs in ev["choice_concepts"] for c in cs),
                     *(x for t in ev["triples"] for x in (t["head"], t["tail"])),
                     *(n for p in ev["paths"] for n in p["nodes"])}) + len(CHOICES)
        assert total > 100
        labels = pg.evaluate("() => window.kgwise.cy.nodes().map(n => n.data('label'))")
        assert len(labels) <= 25
        # every supporting path is drawn, its hops highlighted as stored (head → tail), and nothing else is
        want = set()
        for p in ev["support"]:
            for i, r in enumerate(p["relations"]):
                a, b = p["nodes"][i], p["nodes"][i + 1]
                want.add((b, r, a) if p["inverse"][i] else (a, r, b))
        assert len(want) == 3
        got = {tuple(e) for e in pg.evaluate(
            "() => window.kgwise.cy.edges('.support').map(e => [e.source().data('label'), e.data('label'), "
            "e.target().data('label')])")}
        assert got == want
        assert pg.evaluate("() => window.kgwise.cy.edges('.support')[0].style('line-color')") \
            != pg.evaluate("() => window.kgwise.cy.edges('.path:not(.support)')[0].style('line-color')")
        chosen_text = f"{extra['choice']}) {extra['answer']}"
        chosen = pg.evaluate("() => window.kgwise.cy.nodes('.chosen').map(n => n.data('label'))")
        assert chosen == [chosen_text]
        page.shot("evidence-ranked")
        more = pg.locator("#evidence-more")
        assert more.is_visible() and more.inner_text() == f"Show all {total} nodes"
        more.click()
        assert pg.evaluate("() => window.kgwise.cy.nodes().length") == total
        assert {tuple(e) for e in pg.evaluate(
            "() => window.kgwise.cy.edges('.support').map(e => [e.source().data('label'), e.data('label'), "
            "e.target().data('label')])")} == want
        page.shot("evidence-all")
        more.click()
        assert pg.evaluate("() => window.kgwise.cy.nodes().length") <= 25
