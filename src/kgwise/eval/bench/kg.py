"""``kgwise bench kg``: build, cached load, memory, and grounding + P_sub latency on three graphs.

Graphs: the ConceptNet-scale synthetic graph (CSQA ihtest questions), WordNet 3.0 (CSQA ihtest) and DDB
(MedQA test). Each graph is measured in three fresh subprocesses so that times and peak memory are
honest: (1) build from the source and save the ``.npz`` cache; (2) load the cache, build the grounder
and the extractor, then ground and extract every question; (3) the networkx baseline
(:mod:`kgwise.eval.bench.nx_reference`) on the same graph and questions. Outputs of (2) and (3) are compared
per question (identical ``Subgraph``). Results are written after each graph, so a rerun with
``resume=True`` skips graphs already measured.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import KgwiseError
from kgwise.eval.bench.net import rss_mb

__all__ = ["GRAPHS", "run_kg_benchmark"]

GRAPHS: dict[str, tuple[str, str]] = {
    "conceptnet_scale": ("csqa", "ihtest"),
    "wordnet": ("csqa", "ihtest"),
    "ddb": ("medqa", "test"),
}
"""Graph name -> the (data set, split) whose questions are grounded in it."""


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _digest(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj.to_dict(), sort_keys=True).encode()).hexdigest()


def _stats(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    if a.size == 0:
        return {"median_ms": float("nan"), "p95_ms": float("nan"), "mean_ms": float("nan")}
    return {"median_ms": float(np.median(a)), "p95_ms": float(np.percentile(a, 95)),
            "mean_ms": float(a.mean())}


# ---------------------------------------------------------------------------- stages (run in subprocesses)
def _build(name: str, data: Path, cache: Path) -> dict[str, Any]:
    from kgwise.kg.csr import CSRGraph

    t0 = time.perf_counter()
    graph: CSRGraph
    if name == "conceptnet_scale":
        from kgwise.eval.bench.synthetic import synthetic_conceptnet, wordnet_words

        graph = synthetic_conceptnet(wordnet_words(data / "wordnet"))
    elif name == "wordnet":
        from kgwise.kg.loaders import load_wordnet

        graph = load_wordnet(data / "wordnet")
    elif name == "ddb":
        from kgwise.kg.loaders import load_ddb

        graph = load_ddb(data / "ddb")
    else:
        raise KgwiseError(f"unknown benchmark graph {name!r}; choose one of {', '.join(GRAPHS)}")
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    graph.save(cache)
    return {"build_s": build_s, "save_s": time.perf_counter() - t0, "build_peak_rss_mb": _peak_rss_mb(),
            "nodes": graph.num_nodes, "edges": graph.num_edges, "relations": graph.num_relations,
            "cache_mb": cache.stat().st_size / 2**20}


def _questions(name: str, data: Path, limit: int | None) -> list[Any]:
    from kgwise.datasets import load

    dataset, split = GRAPHS[name]
    qs = load(dataset, split, data)
    return qs[:limit] if limit is not None else qs


def _query(name: str, data: Path, cache: Path, limit: int | None, digests: Path) -> dict[str, Any]:
    from kgwise.extract.subgraph import SubgraphExtractor
    from kgwise.kg.csr import CSRGraph
    from kgwise.kg.grounding import Grounder, GrounderConfig

    questions = _questions(name, data, limit)
    base_rss = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    graph = CSRGraph.load(cache)
    load_s, load_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    load_rss = rss_mb() - base_rss
    t0 = time.perf_counter()
    grounder = Grounder(graph, GrounderConfig(wordnet_dir=data / "wordnet"))
    grounder_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    extractor = SubgraphExtractor(graph)
    extractor_s = time.perf_counter() - t0
    ground_ms: list[float] = []
    total_ms: list[float] = []
    cpu_ms: list[float] = []
    sizes: list[tuple[int, int, int, int, int, int]] = []
    out: list[str] = []
    for q in questions:
        t0, c0 = time.perf_counter(), time.process_time()
        g = grounder.ground(q)
        t1 = time.perf_counter()
        sg = extractor.extract(q, g)
        t2, c2 = time.perf_counter(), time.process_time()
        cpu_ms.append((c2 - c0) * 1e3)
        ground_ms.append((t1 - t0) * 1e3)
        total_ms.append((t2 - t0) * 1e3)
        out.append(_digest(sg))
        sizes.append((len(g.question_nodes), sum(map(len, g.choice_nodes)),
                      sum(1 for c in g.choice_nodes if c), len(sg.nodes), len(sg.edges), len(sg.paths)))
    digests.write_text("\n".join(out) + "\n", encoding="utf-8")
    s = np.asarray(sizes, dtype=np.float64).reshape(-1, 6)
    n_choices = sum(len(q.choices) for q in questions)
    psub = _stats(total_ms)
    return {
        "questions": len(questions),
        "cached_load_s": load_s,
        "cached_load_cpu_s": load_cpu_s,
        "load_rss_mb": load_rss,
        "grounder_init_s": grounder_s,
        "extractor_init_s": extractor_s,
        "psub_median_ms": psub["median_ms"],
        "psub_p95_ms": psub["p95_ms"],
        "psub_mean_ms": psub["mean_ms"],
        "psub_median_cpu_ms": _stats(cpu_ms)["median_ms"],
        "psub_p95_cpu_ms": _stats(cpu_ms)["p95_ms"],
        "grounding_median_ms": _stats(ground_ms)["median_ms"],
        "questions_per_s": len(questions) / (sum(total_ms) / 1e3) if total_ms else float("nan"),
        "peak_rss_mb": _peak_rss_mb(),
        "mean_question_concepts": float(s[:, 0].mean()) if len(s) else 0.0,
        "mean_choice_concepts": float(s[:, 1].mean()) if len(s) else 0.0,
        "choices_grounded_frac": float(s[:, 2].sum() / n_choices) if n_choices else 0.0,
        "mean_nodes": float(s[:, 3].mean()) if len(s) else 0.0,
        "mean_edges": float(s[:, 4].mean()) if len(s) else 0.0,
        "mean_paths": float(s[:, 5].mean()) if len(s) else 0.0,
        "questions_with_paths_frac": float((s[:, 5] > 0).mean()) if len(s) else 0.0,
    }


def _networkx(name: str, data: Path, cache: Path, limit: int | None, digests: Path) -> dict[str, Any]:
    from kgwise.eval.bench.nx_reference import NxSubgraphExtractor, to_networkx
    from kgwise.kg.csr import CSRGraph
    from kgwise.kg.grounding import Grounder, GrounderConfig

    questions = _questions(name, data, limit)
    graph = CSRGraph.load(cache)
    grounder = Grounder(graph, GrounderConfig(wordnet_dir=data / "wordnet"))
    t0 = time.perf_counter()
    nxg = to_networkx(graph)
    build_s = time.perf_counter() - t0
    extractor = NxSubgraphExtractor(nxg)
    expected = digests.read_text(encoding="utf-8").split()
    total_ms: list[float] = []
    cpu_ms: list[float] = []
    identical = 0
    for q, want in zip(questions, expected, strict=False):
        t0, c0 = time.perf_counter(), time.process_time()
        g = grounder.ground(q)
        sg = extractor.extract(q, g)
        total_ms.append((time.perf_counter() - t0) * 1e3)
        cpu_ms.append((time.process_time() - c0) * 1e3)
        identical += _digest(sg) == want
    st = _stats(total_ms)
    return {"nx_build_s": build_s, "nx_psub_median_ms": st["median_ms"], "nx_psub_p95_ms": st["p95_ms"],
            "nx_psub_mean_ms": st["mean_ms"], "nx_psub_median_cpu_ms": _stats(cpu_ms)["median_ms"],
            "nx_questions": len(total_ms), "identical_outputs": identical,
            "nx_peak_rss_mb": _peak_rss_mb()}


def _stage_main(argv: Sequence[str]) -> None:
    """Entry of one stage subprocess: ``STAGE NAME DATA WORKDIR LIMIT`` -> ``WORKDIR/NAME.STAGE.json``."""
    stage, name, data_s, work_s, limit_s = argv
    data, work = Path(data_s), Path(work_s)
    limit = None if limit_s == "all" else int(limit_s)
    cache = work / f"{name}.npz"
    digests = work / f"{name}.digests"
    stages: dict[str, Callable[[], dict[str, Any]]] = {
        "build": lambda: _build(name, data, cache),
        "query": lambda: _query(name, data, cache, limit, digests),
        "networkx": lambda: _networkx(name, data, cache, limit, digests),
    }
    result = stages[stage]()
    (work / f"{name}.{stage}.json").write_text(json.dumps(result), encoding="utf-8")


def _run_stage(stage: str, name: str, data: Path, work: Path, limit: int | None, log: Path) -> dict[str, Any]:
    out = work / f"{name}.{stage}.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "kgwise.eval.bench.kg", stage, name, str(data), str(work),
           "all" if limit is None else str(limit)]
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0 or not out.is_file():
        raise KgwiseError(f"benchmark stage {stage!r} on {name!r} failed (exit {proc.returncode}); see {log}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def run_kg_benchmark(
    data: Path,
    work: Path,
    limit: int | None = None,
    graphs: Sequence[str] = tuple(GRAPHS),
    nx_limit: int | None = None,
    previous: dict[str, Any] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure every graph in ``graphs``; ``limit`` caps the questions, ``nx_limit`` (default
    ``limit``) the questions given to the networkx baseline (the ratio compares the same questions).
    Entries of ``previous`` are kept and not re-measured; ``on_result`` gets the report after each graph."""
    for name in graphs:
        if name not in GRAPHS:
            raise KgwiseError(f"unknown benchmark graph {name!r}; choose one of {', '.join(GRAPHS)}")
    work.mkdir(parents=True, exist_ok=True)
    log = work / "bench_kg.log"
    report: dict[str, Any] = dict(previous or {})
    nx_n = nx_limit if nx_limit is not None else limit
    for name in graphs:
        if name in report and "networkx_ratio" in report[name]:
            continue
        say = progress or (lambda _m: None)
        say(f"{name}: build")
        entry: dict[str, Any] = {"questions_from": "/".join(GRAPHS[name])}
        entry.update(_run_stage("build", name, data, work, limit, log))
        say(f"{name}: cached load + grounding + P_sub")
        entry.update(_run_stage("query", name, data, work, limit, log))
        say(f"{name}: networkx baseline")
        nx = _run_stage("networkx", name, data, work, nx_n, log)
        entry.update(nx)
        ours: dict[str, Any] = entry
        if nx_n is not None and nx_n < entry["questions"]:
            # the ratio compares the same questions: re-time ours on the baseline's subset
            ours = _run_stage("query", name, data, work, nx_n, log)
            entry["psub_median_ms_nx_subset"] = ours["psub_median_ms"]
            entry["psub_median_cpu_ms_nx_subset"] = ours["psub_median_cpu_ms"]
        for key, theirs, mine in (("networkx_ratio", "nx_psub_median_ms", "psub_median_ms"),
                                  ("networkx_ratio_cpu", "nx_psub_median_cpu_ms", "psub_median_cpu_ms"),
                                  ("networkx_ratio_mean", "nx_psub_mean_ms", "psub_mean_ms")):
            entry[key] = entry[theirs] / ours[mine] if ours[mine] > 0 else float("nan")
        entry["identical_frac"] = entry["identical_outputs"] / max(entry["nx_questions"], 1)
        report[name] = entry
        if on_result is not None:
            on_result(report)
    return report


if __name__ == "__main__":
    _stage_main(sys.argv[1:])
