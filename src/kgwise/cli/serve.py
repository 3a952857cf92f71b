"""``kgwise serve``: run the HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import BanditOption, PolicyOption, ScoringOption, friendly_errors
from kgwise.errors import ConfigError
from kgwise.kg.sources import GRAPH_FILE_HELP, GRAPH_SPEC_HELP


@app.command("serve")
@friendly_errors
def serve(
    config: Annotated[Path | None, typer.Option(
        "--config", exists=True, dir_okay=False, help="A kgwise.toml: serves its Pipeline through the "
        "OpenAI-compatible API (/v1/chat/completions, /v1/models, /v1/feedback, …) and the web page at /; "
        "combines with the other options.")] = None,
    state: Annotated[Path | None, typer.Option(
        "--state", file_okay=False, help="The pipeline's state directory (default: .kgwise-state/ beside "
        "--config).")] = None,
    kg: Annotated[Path | None, typer.Option("--kg", help="The graph file ("
                                            + GRAPH_FILE_HELP + "): "
                                            "serves /v1/answer and /v1/subgraph.")] = None,
    llm: Annotated[str, typer.Option("--llm", help="LLM spec, e.g. gemma3-270m.")] = "smollm2-135m",
    policy: PolicyOption = None,
    bandit: BanditOption = None,
    scoring: ScoringOption = None,
    calibration: Annotated[Path | None, typer.Option(
        "--calibration", help="`kgwise calibrate` output: answers carry a prediction_set.")] = None,
    allow_calibration_mismatch: Annotated[bool, typer.Option(
        "--allow-calibration-mismatch", help="Serve calibrated sets (--calibration, --uag) even for another "
        "KG, LLM, combination, scoring, policy or bandit than they were made with (marked guaranteed: "
        "false).")] = False,
    router: Annotated[Path | None, typer.Option("--router", hidden=True)] = None,
    uag: Annotated[Path | None, typer.Option(
        "--uag", help="`kgwise uag calibrate` output: serves /v1/answer-set.")] = None,
    uag_kg: Annotated[str | None, typer.Option(
        "--uag-kg", help="KG for /v1/answer-set (default: the one the calibration names): "
        + GRAPH_SPEC_HELP + ".")] = None,
    uag_llm: Annotated[str | None, typer.Option(
        "--uag-llm", help="LLM for /v1/answer-set (default: the one the calibration used).")] = None,
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
        min=0, help="Requests that may wait for the LLM (/v1/answer, /v1/answer-set) while it works; more "
        "get 429 with Retry-After.")] = 8,
    request_timeout: Annotated[float, typer.Option(
        min=1.0, help="Seconds a request may wait and run in all (then 503).")] = 120.0,
    torch_threads: Annotated[int, typer.Option(
        min=1, help="torch threads of the question encoder (1 serves concurrent requests fastest).")] = 1,
) -> None:
    """Serve over HTTP: GET /health; with --config the pipeline (OpenAI-compatible API, the web page, and
    for its external arms POST /v1/route, /v1/route/feedback and /v1/route/cancel); KnowGPT at POST
    /v1/answer and /v1/subgraph; UAG answer sets at POST /v1/answer-set (OpenAPI docs at /docs)."""
    import uvicorn

    from kgwise.server import ServerSettings, create_app
    from kgwise.server.guard import (
        check_exposure,
        default_allowed_hosts,
        keys_from_environment,
        load_api_keys,
    )

    if router is not None:  # a router state file of the previous version: not served, not migrated
        from kgwise.app.config import ROUTER_FILE_REFUSED

        raise ConfigError(f"--router {router}: {ROUTER_FILE_REFUSED}")
    keys = load_api_keys(api_key_file, keys_from_environment())
    check_exposure(host, keys, insecure)
    if state is not None and config is None:
        raise ConfigError("--state needs --config")
    settings = ServerSettings(kg=kg, llm=llm, policy=policy, bandit=bandit, scoring=scoring,
                              calibration=calibration, allow_calibration_mismatch=allow_calibration_mismatch,
                              uag=uag, uag_kg=uag_kg, uag_llm=uag_llm, api_keys=keys,
                              allowed_hosts=tuple(allowed_host or default_allowed_hosts(host)),
                              cors_origins=tuple(cors_origin or ()), max_body_bytes=max_body,
                              queue_limit=queue, request_timeout_s=request_timeout,
                              torch_threads=torch_threads)
    if config is None:
        uvicorn.run(create_app(settings), host=host, port=port)
        return
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    served = ServedPipeline.from_config(config, state)
    try:
        uvicorn.run(create_app(settings, pipelines=pipeline_hub({"kgwise": served})), host=host, port=port)
    finally:
        served.close()  # writes the state and releases the directory

