"""``kgwise bench openai``: load a running kgwise server's ``/v1/chat/completions`` (see
:mod:`kgwise.eval.bench.openai_serve`); ``kgwise bench page``: its web page in a headless browser (see
:mod:`kgwise.eval.bench.page`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import bench_app
from kgwise.cli.common import JsonOption, err_console, friendly_errors, write_json
from kgwise.eval.bench.openai_serve import bench_chat_completions


@bench_app.command("openai")
@friendly_errors
def bench_openai(
    url: Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8000.")],
    model: Annotated[str, typer.Option(help="Model id: a pipeline, or <pipeline>/<arm>.")] = "kgwise",
    requests: Annotated[int, typer.Option(min=1, help="Timed requests in all.")] = 2000,
    concurrency: Annotated[int, typer.Option(min=1, help="Clients sending at once.")] = 8,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed requests first.")] = 20,
    stream: Annotated[bool, typer.Option(help="Ask for server-sent events (stream: true).")] = False,
    max_seconds: Annotated[float, typer.Option(min=0.1, help="Stop sending after this long.")] = 120.0,
    open_questions: Annotated[bool, typer.Option(help="Send questions without choices.")] = False,
    server_pid: Annotated[int | None, typer.Option(help="The server's process id: report its CPU time per "
                                                        "request.")] = None,
    json_out: JsonOption = None,
) -> None:
    """Throughput and latency of POST /v1/chat/completions at a bounded concurrency (the key, if the server
    needs one, from $KGWISE_API_KEY); targets for a pipeline without model time: ≥ 100 req/s at
    concurrency 8, p99 ≤ 100 ms."""
    report = bench_chat_completions(url, model, requests=requests, concurrency=concurrency, warmup=warmup,
                                    stream=stream, max_s=max_seconds, choices=[] if open_questions else None,
                                    api_key=os.environ.get("KGWISE_API_KEY"), server_pid=server_pid)
    lat = report.latency_ms
    err_console.print(f"{report.ok}/{report.sent} ok in {report.wall_s:.2f} s: "
                      f"{report.requests_per_s:.1f} req/s"
                      + (f", p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms" if lat else "")
                      + (f"; errors {report.errors}" if report.errors else "")
                      + (f"; server CPU {report.server_cpu_ms_per_request:.2f} ms/request"
                         if report.server_cpu_ms_per_request is not None else "")
                      + (f"; first text p50 {report.first_content_ms['p50']:.1f} ms"
                         if report.first_content_ms else ""))
    write_json(report.to_dict(), json_out)


@bench_app.command("page")
@friendly_errors
def bench_page(
    url: Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8000.")],
    runs: Annotated[int, typer.Option(min=1, help="Fresh browser contexts (first visits), each followed by a "
                                                  "return visit.")] = 5,
    chromium: Annotated[Path, typer.Option(help="The Chromium executable Playwright drives.")] = Path(
        "/usr/bin/chromium"),
    json_out: JsonOption = None,
) -> None:
    """The web page's first and return visits in headless Chromium: bytes transferred, requests, DOM
    interactive, and when it is usable (its model list filled); targets: first load ≤ 1 MB, usable in
    ≤ 1 s. The key, if the server needs one, from $KGWISE_API_KEY."""
    from kgwise.eval.bench.page import bench_page as run

    report = run(url, runs=runs, chromium=chromium, api_key=os.environ.get("KGWISE_API_KEY"))
    for name, s in (("first visit", report.first_visit), ("return visit", report.return_visit)):
        err_console.print(f"{name} (median of {runs}): {s['bytes'] / 1000:.0f} kB in {s['requests']:.0f} "
                          f"requests, DOM interactive {s['dom_interactive_ms']:.0f} ms, usable "
                          f"{s['ready_ms']:.0f} ms")
    if report.foreign_requests:
        err_console.print(f"refused requests to other hosts: {report.foreign_requests}")
    write_json(report.to_dict(), json_out)
