"""``kgwise serve``: run the HTTP service."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import app
from kgwise.cli.common import BanditOption, PolicyOption, ScoringOption, friendly_errors
from kgwise.kg.sources import GRAPH_FILE_HELP, GRAPH_SPEC_HELP


@app.command("serve")
@friendly_errors
def serve(
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
    router: Annotated[Path | None, typer.Option(
        "--router", help="`kgwise route init` output: serves /v1/route and /v1/route/feedback, updated "
                         "in place (see --router-save-every).")] = None,
    router_save_every: Annotated[float, typer.Option(
        min=0.1, help="Seconds between writes of the router's state and waiting decisions after a change; "
                      "a crash loses at most this much learning and spending.")] = 30.0,
    uag: Annotated[Path | None, typer.Option(
        "--uag", help="`kgwise uag calibrate` output: serves /v1/answer-set.")] = None,
    uag_kg: Annotated[str | None, typer.Option(
        "--uag-kg", help="KG for /v1/answer-set (default: the one the calibration names): "
        + GRAPH_SPEC_HELP + ".")] = None,
    uag_llm: Annotated[str | None, typer.Option(
        "--uag-llm", help="LLM for /v1/answer-set (default: the one the calibration used).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """Serve over HTTP: GET /health; KnowGPT at POST /v1/answer and /v1/subgraph; Coke routing at POST
    /v1/route and /v1/route/feedback; UAG answer sets at POST /v1/answer-set (OpenAPI docs at /docs)."""
    import uvicorn

    from kgwise.server import ServerSettings, create_app

    settings = ServerSettings(kg=kg, llm=llm, policy=policy, bandit=bandit, scoring=scoring,
                              calibration=calibration, allow_calibration_mismatch=allow_calibration_mismatch,
                              router=router, router_save_every_s=router_save_every, uag=uag, uag_kg=uag_kg,
                              uag_llm=uag_llm)
    uvicorn.run(create_app(settings), host=host, port=port)
