"""Offline API docs: ``/docs`` (Swagger UI) and ``/redoc`` (Redoc) served from assets shipped inside the
package (``kgwise/server/static/vendor``, from the npm packages ``swagger-ui-dist`` 5.35.0 and ``redoc``
2.5.4, with their licences), so they render on a machine without internet. Build the application with
``FastAPI(docs_url=None, redoc_url=None)`` and call :func:`install_docs` (which also mounts ``/static``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.middleware.gzip import GZipMiddleware
from starlette.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "install_docs", "mount_static"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The web page and the vendored assets, shipped as package data."""


def mount_static(app: FastAPI) -> None:
    """Serve :data:`STATIC_DIR` at ``/static`` (gzip-compressed when the client accepts it); once per app."""
    if any(getattr(r, "path", None) == "/static" for r in app.routes):
        return
    if not (STATIC_DIR / "vendor" / "swagger-ui" / "swagger-ui-bundle.js").is_file():
        raise FileNotFoundError(f"{STATIC_DIR}: the packaged web assets are missing (broken install?)")
    app.mount("/static", GZipMiddleware(StaticFiles(directory=STATIC_DIR), minimum_size=1024), name="static")


def install_docs(app: FastAPI) -> None:
    """``/docs`` and ``/redoc`` over ``app.openapi_url`` with the packaged assets (no CDN, no Google Fonts,
    no Swagger validator call)."""
    mount_static(app)
    openapi_url = app.openapi_url or "/openapi.json"
    title = app.title

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{title} – API docs",
            swagger_js_url="/static/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/static/favicon.svg",
            swagger_ui_parameters={"validatorUrl": None, "defaultModelsExpandDepth": 0})

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=f"{title} – API reference",
                              redoc_js_url="/static/vendor/redoc/redoc.standalone.js",
                              redoc_favicon_url="/static/favicon.svg", with_google_fonts=False)
