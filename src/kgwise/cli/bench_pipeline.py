"""``kgwise bench pipeline``: the pipeline's own time per question on the ConceptNet-scale synthetic graph
(see :mod:`kgwise.eval.bench.pipeline`)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from kgwise.cli.apps import bench_app
from kgwise.cli.common import DataOption, JsonOption, err_console, friendly_errors, write_json
from kgwise.config import data_dir
from kgwise.errors import ConfigError


@bench_app.command("pipeline")
@friendly_errors
def bench_pipeline(
    nodes: Annotated[int, typer.Option(min=1000, help="Nodes of the synthetic graph.")] = 1_600_000,
    edges: Annotated[int | None, typer.Option(
        min=1000, help="Edges of the synthetic graph (default: ConceptNet's ratio, 3.4 M per 1.6 M nodes).")
                     ] = None,
    graph: Annotated[Path | None, typer.Option(
        exists=True, dir_okay=False, help="A built synthetic graph (.npz) instead of --nodes/--edges.")
                     ] = None,
    fit: Annotated[int, typer.Option(min=1, help="CSQA ihdev questions the pipeline is fitted on.")] = 200,
    questions: Annotated[int, typer.Option(min=1, help="CSQA ihdev questions timed (after the fit's).")
                         ] = 300,
    context: Annotated[str, typer.Option(help="Router context before the fit chooses: question, "
                                              "question+free or free.")] = "question+free",
    workdir: Annotated[Path | None, typer.Option(
        help="Where the graph and the state directory go (default: OUT_work beside --json OUT, else temp).")
                       ] = None,
    data: DataOption = None,
    json_out: JsonOption = None,
) -> None:
    """Pipeline overhead without model time (ground + route + calibrate + record): median and p90 per
    question, its parts, and the ratio to the bare (zero-time) arm call; target ≤ 10 ms median."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from kgwise.app.config import CONTEXTS
    from kgwise.datasets import load
    from kgwise.embed import MiniLM
    from kgwise.eval.bench.pipeline import PipelineBenchConfig, run_pipeline_benchmark
    from kgwise.eval.bench.synthetic import SyntheticConfig, synthetic_conceptnet, wordnet_words
    from kgwise.kg.csr import CSRGraph

    if context not in CONTEXTS:
        raise ConfigError(f"--context must be one of {', '.join(CONTEXTS)}, got {context!r}")
    cfg = PipelineBenchConfig(fit, questions, context=context)
    root = data_dir(data)
    work = workdir or (json_out.parent / (json_out.stem + "_work") if json_out is not None
                       else Path(tempfile.mkdtemp(prefix="kgwise-bench-pipeline-")))
    work.mkdir(parents=True, exist_ok=True)
    setup: dict[str, float] = {}
    t = time.perf_counter()
    if graph is None:
        n_edges = edges if edges is not None else round(nodes * 3.4 / 1.6)
        cached = work / f"synthetic-{nodes}-{n_edges}.npz"
        if cached.is_file():
            kg = CSRGraph.load(cached)
            setup["graph_load_s"] = time.perf_counter() - t
        else:
            err_console.print(f"[dim]building the synthetic graph: {nodes} nodes, {n_edges} edges[/dim]")
            kg = synthetic_conceptnet(wordnet_words(root / "wordnet"), SyntheticConfig(nodes, n_edges))
            kg.save(cached)
            setup["graph_build_s"] = time.perf_counter() - t
    else:
        kg = CSRGraph.load(graph)
        setup["graph_load_s"] = time.perf_counter() - t
    qs = load("csqa", "ihdev", root)
    report = run_pipeline_benchmark(kg, qs, MiniLM(cache=False), cfg, work,
                                    progress=lambda m: err_console.print(f"[dim]{m}[/dim]"), setup_s=setup)
    out = report.to_dict() | {"load_average": list(os.getloadavg()), "cpus": os.cpu_count()}
    err_console.print(f"overhead per question: median {report.overhead.median_ms:.2f} ms, p90 "
                      f"{report.overhead.p90_ms:.2f} ms (target ≤ {report.target_overhead_median_ms:g} ms "
                      f"median: {'met' if report.met else 'missed'}); bare arm call median "
                      f"{report.bare_arm_call.median_ms:.4f} ms; load average {os.getloadavg()[0]:.2f}")
    write_json(out, json_out)


__all__ = ["bench_pipeline"]
