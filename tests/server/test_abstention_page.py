"""The web page with abstention, in a real browser (``test_web``'s fixtures): an answer shows "Not sure —"
with its reason or "Answered with a promise:", the router's arms table the share answered and the accuracy
among answered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.app.test_pipeline import question
from tests.server.test_abstention import abstaining
from tests.server.test_web import Page, _ask, _open_router, artefacts, browser, page  # noqa: F401  fixtures


def test_the_page_shows_not_sure_and_the_share_answered(
        tmp_path: Path, serve_pipelines: Any, page: Page) -> None:  # noqa: F811  (test_web's fixture)
    with serve_pipelines({"kgwise": abstaining(tmp_path)}) as url:
        pg = page.page
        pg.goto(url + "/")
        text, choices = question(0)
        x = _ask(pg, text, choices)  # routed to the free arm, which certifies nothing
        assert x["abstention"]["abstained"] and pg.inner_text("#answer") == "not sure"
        assert pg.inner_text("#set p.abstention").startswith("Not sure — not sure: arm 'free'")
        pg.click("#fb-correct")
        x = _ask(pg, *question(1), model="kgwise/dear")
        note = pg.inner_text("#set p.abstention")
        assert note.startswith("Answered with a promise: accuracy ≥ 0.7") != x["abstention"]["abstained"]
        page.shot("abstention-answer")
        _open_router(pg)
        cells = {a: pg.inner_text(f"table.arms tr[data-arm='{a}'] td.abstention") for a in ("free", "dear")}
        assert cells["free"] == "answered 0 of 1 (0%), no feedback yet"
        given = int(not x["abstention"]["abstained"])
        assert cells["dear"] == f"answered {given} of 1 ({100 * given}%), no feedback yet"
        assert "abstention: answered, accuracy among answered" in pg.inner_text("table.arms thead")
        page.shot("abstention-router")
