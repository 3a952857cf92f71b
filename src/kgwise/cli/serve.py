"""``kgwise serve``: run the HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import friendly_errors


@app.command("serve")
@friendly_errors
def serve(
    config: Annotated[Path, typer.Option(
        "--config", exists=True, dir_okay=False, help="A kgwise.toml: serves its Pipeline through the "
        "OpenAI-compatible API (/v1/chat/completions, /v1/models, /v1/feedback, /v1/status), its KG "
        "evidence (/v1/evidence) and the web page at /.")],
    state: Annotated[Path | None, typer.Option(
        "--state", file_okay=False, help="The pipeline's state directory (default: .kgwise-state/ beside "
        "--config).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (beyond loopback only with API keys or "
                                      "--insecure).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    api_key_file: Annotated[Path | None, typer.Option(
        "--api-key-file", exists=True, dir_okay=False, help="API keys, one per line (≥ 16 characters; also "
        "$KGWISE_API_KEYS, comma separated): every request must carry 'Authorization: Bearer KEY'.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="Listen beyond loopback without API keys (anyone who reaches the port controls "
        "the budget and the models).")] = False,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", help="A Host header to accept (against DNS rebinding; '*': any); repeatable. "
        "Default: the loopback names and --host.")] = None,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin", help="A browser origin allowed to call the API (CORS is off without one); "
        "repeatable.")] = None,
    max_body: Annotated[int, typer.Option(min=1000, help="Largest request body, in bytes (larger: 413).")
                        ] = 1_000_000,
    queue: Annotated[int, typer.Option(
        min=0, help="Evidence requests that may wait while others are extracted; more get 429 with "
        "Retry-After.")] = 8,
    request_timeout: Annotated[float, typer.Option(
        min=1.0, help="Seconds a request may wait and run in all (then 503).")] = 120.0,
    torch_threads: Annotated[int, typer.Option(
        min=1, help="torch threads of the question encoder (1 serves concurrent requests fastest).")] = 1,
    access_log: Annotated[bool, typer.Option(
        "--access-log/--no-access-log", help="Log every request on stderr (uvicorn's access log; about "
        "2 % of a replica's CPU under `kgwise bench serve --replicas`).")] = True,
) -> None:
    """Serve the pipeline of --config over HTTP: GET /health, the OpenAI-compatible API, POST /v1/evidence
    and the web page (OpenAPI docs at /docs)."""
    import uvicorn

    from kgwise.server import ServerSettings, create_app
    from kgwise.server.guard import (
        check_exposure,
        default_allowed_hosts,
        keys_from_environment,
        load_api_keys,
    )
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    keys = load_api_keys(api_key_file, keys_from_environment())
    check_exposure(host, keys, insecure)
    settings = ServerSettings(api_keys=keys, allowed_hosts=tuple(allowed_host or default_allowed_hosts(host)),
                              cors_origins=tuple(cors_origin or ()), max_body_bytes=max_body,
                              queue_limit=queue, request_timeout_s=request_timeout,
                              torch_threads=torch_threads)
    served = ServedPipeline.from_config(config, state)
    try:
        web = create_app(settings, pipeline_hub({"kgwise": served}))  # sets the encoder's threads
        served.pipeline.warm()  # before listening: the first requests must not wait for the models
        uvicorn.run(web, host=host, port=port, access_log=access_log)
    finally:
        served.close()  # writes the state and releases the directory
