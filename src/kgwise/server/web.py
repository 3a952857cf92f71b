"""The web page at ``/``: ask a question, see the answer, the arm and every arm's score, the calibrated set,
the cost and the evidence as a graph (cytoscape.js 3.35.0, vendored from npm), give feedback; and a router
page (``/#router``): spend against budget over time, per-arm selections, accuracy and live coverage, pending
decisions. Hand-written HTML/JS/CSS in ``kgwise/server/static``; it talks only to this server's
``/v1/models``, ``/v1/chat/completions``, ``/v1/feedback`` and ``/v1/status``, and asks for an API key when
the server answers 401 (sent as a bearer token)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import FileResponse

from kgwise.server.docs import STATIC_DIR, mount_static

__all__ = ["PAGE_HEADERS", "install_web"]

PAGE_HEADERS = {
    "cache-control": "no-cache",
    # scripts, styles and data from this server only (styles may be set by cytoscape.js at run time); no
    # framing (clickjacking), no plug-ins, no form posts elsewhere
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def install_web(app: FastAPI) -> None:
    """``GET /`` (the page, with :data:`PAGE_HEADERS`) and ``/static``."""
    mount_static(app)
    index = STATIC_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(index, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)
