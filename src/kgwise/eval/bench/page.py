"""``kgwise bench page``: the web page at ``/`` loaded in a real headless browser (Playwright driving
Chromium), ``runs`` times each in a fresh browser context (an empty cache: a first visit) and once more in
the same context (a return visit).

Per load: the bytes transferred (response headers + bodies of every request), the number of requests,
the navigation timings (DOM interactive, load event) and the time until the page is usable — its model
list is filled from ``/v1/models``, which is when a question can be asked (``ready_ms``, from the start
of the navigation). Bytes are as the browser reports them: a return visit counts what it took from its
cache too. Any request to a host other than the server's is refused and counted: the page must
work offline. The targets: first load ≤ 1 MB transferred and interactive in ≤ 1 s locally.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kgwise.errors import ConfigError
from kgwise.types import Serialisable

__all__ = ["TARGET_BYTES", "TARGET_READY_MS", "PageBenchReport", "PageLoad", "bench_page"]

TARGET_BYTES = 1_000_000
TARGET_READY_MS = 1000.0
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync")
READY = "() => document.querySelectorAll('#model option').length > 0"


@dataclass(frozen=True, slots=True)
class PageLoad:
    """One load of the page (``cached``: a return visit in the same browser context)."""

    cached: bool
    requests: int
    bytes: int
    dom_interactive_ms: float
    load_event_ms: float
    ready_ms: float


@dataclass(frozen=True)
class PageBenchReport(Serialisable):
    """Every load, the medians of first and return visits, foreign requests refused, target checks."""

    url: str
    loads: list[PageLoad]
    first_visit: dict[str, float]
    return_visit: dict[str, float]
    foreign_requests: list[str]
    targets: dict[str, bool] = field(default_factory=dict)


def _median(loads: list[PageLoad], key: str) -> float:
    return float(statistics.median(float(getattr(x, key)) for x in loads))


def _summary(loads: list[PageLoad]) -> dict[str, float]:
    keys = ("requests", "bytes", "dom_interactive_ms", "load_event_ms", "ready_ms")
    return {k: _median(loads, k) for k in keys} if loads else {}


def bench_page(url: str, runs: int = 5, chromium: Path = Path("/usr/bin/chromium"),
               api_key: str | None = None, timeout_s: float = 30.0) -> PageBenchReport:
    """Load ``url``'s page ``runs`` times cold and once warm per run (see the module doc); ``api_key`` is
    stored the way the page keeps it when the server needs one."""
    if runs < 1:
        raise ConfigError(f"runs must be ≥ 1, got {runs}")
    if not chromium.exists():
        raise ConfigError(f"{chromium} does not exist (apt-get install chromium, or give --chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise ConfigError("bench page needs playwright (pip install 'kgwise[eval]')") from exc
    base = url.rstrip("/")
    host = urlsplit(base).hostname
    foreign: list[str] = []
    loads: list[PageLoad] = []

    def guard(route: Any) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in ("data", "blob") or parts.hostname == host:
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=list(CHROMIUM_ARGS), headless=True)
        try:
            for _ in range(runs):
                context = browser.new_context()
                try:
                    context.route("**/*", guard)
                    if api_key:
                        context.add_init_script(f"localStorage.setItem('kgwise.apiKey', {api_key!r})")
                    page = context.new_page()
                    page.set_default_timeout(timeout_s * 1000)
                    for cached in (False, True):
                        loads.append(_load(page, base + "/", cached))
                finally:
                    context.close()
        finally:
            browser.close()
    first = _summary([x for x in loads if not x.cached])
    again = _summary([x for x in loads if x.cached])
    targets = {f"first load bytes <= {TARGET_BYTES}": first["bytes"] <= TARGET_BYTES,
               f"first load ready_ms <= {TARGET_READY_MS:g}": first["ready_ms"] <= TARGET_READY_MS,
               "no request left the server's host": not foreign}
    return PageBenchReport(url=base, loads=loads, first_visit=first, return_visit=again,
                           foreign_requests=foreign, targets=targets)


def _load(page: Any, url: str, cached: bool) -> PageLoad:
    """Navigate ``page`` to ``url`` and measure one load."""
    finished: list[Any] = []

    def record(request: Any) -> None:
        finished.append(request)

    page.on("requestfinished", record)
    try:
        page.goto(url)
        page.wait_for_function(READY, polling=5)
        ready = float(page.evaluate("() => performance.now()"))
        page.wait_for_load_state("load")
        nav = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0]; "
                            "return [n.domInteractive, n.loadEventEnd]; }")
    finally:
        page.remove_listener("requestfinished", record)
    sizes = [r.sizes() for r in finished]
    return PageLoad(cached=cached, requests=len(sizes),
                    bytes=sum(int(z["responseBodySize"]) + int(z["responseHeadersSize"]) for z in sizes),
                    dom_interactive_ms=float(nav[0]), load_event_ms=float(nav[1]), ready_ms=ready)
