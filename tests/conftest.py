"""Shared fixtures: the real data directory beside the project (``../shared/data``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.conformal.grid import TableBatch
from kgwise.eval.bench.net import free_port
from kgwise.kg import CSRGraph
from kgwise.types import Question

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("KGWISE_DATA") or ROOT.parent / "shared" / "data").resolve()
os.environ["KGWISE_DATA"] = str(DATA)  # absolute: tests that change directory still find it


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real shared data; the suite fails loudly (not skips) when it is missing."""
    assert DATA.is_dir(), f"shared data not found at {DATA}; set KGWISE_DATA"
    return DATA


@pytest.fixture(scope="session")
def webqsp_uag_tables(data_dir: Path) -> TableBatch:
    """UAG tables of the first 300 aligned WebQSP questions over the Freebase fragment, with RoG's recorded
    generations (built once per cache: a cold build encodes every retrieved relation path)."""
    from kgwise.eval.uag.experiment import UAGExperimentConfig, load_webqsp_data, webqsp_tables

    cfg = UAGExperimentConfig(limit=300)
    return webqsp_tables(data_dir, cfg, load_webqsp_data(data_dir, cfg.gnn, cfg.limit), progress=False)


@pytest.fixture(scope="session")
def uag_calibration(data_dir: Path, webqsp_uag_tables: TableBatch, tmp_path_factory: pytest.TempPathFactory
                    ) -> Path:
    """A UAG calibration file (``kgwise uag calibrate``'s) at α = 0.4 on 300 WebQSP questions with RoG's
    recorded generations, over the Freebase fragment."""
    from kgwise.conformal.calibrated import CalibratedUAG, TableSettings, calibrate_uag
    from kgwise.conformal.provenance import graph_fingerprint
    from kgwise.kg.loaders import load_tsv

    uag, summary = calibrate_uag(webqsp_uag_tables, 0.4, TableSettings())
    kg = data_dir / "webqsp" / "freebase_fragment.tsv"
    summary.update(kg=str(kg), generator="recorded:rog",
                   made_with={"kg": graph_fingerprint(load_tsv(kg)), "generator": None})
    return CalibratedUAG(uag, TableSettings(), summary).save(tmp_path_factory.mktemp("uag") / "uag.json")


def write_rog(questions: list[Question], graph: CSRGraph, out: Path, split: str = "test", shards: int = 2,
              jsonl: bool = False) -> Path:
    """``questions`` in RoG's released schema (id, question, answer, q_entity, a_entity, graph, choices),
    each with the out-edges of ``graph`` within two hops of its topic entities as its subgraph; as
    ``<split>-0000k-of-0000n-….parquet`` shards in ``out`` (returned), or as ``out/<split>.jsonl``."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for q in questions:
        hop0 = [n for n in (graph.find(t) for t in q.topic_entities) if n is not None]
        hop1: npt.ArrayLike = graph.neighbors(hop0, "out") if hop0 else []
        h, r, t = graph.incident(np.union1d(hop0, hop1).astype(np.int64), "out")
        triples = [list(x) for x in graph.triples(h, r, t)]
        nodes = {x for tr in triples for x in (tr[0], tr[2])}
        rows.append({"id": q.id, "question": q.text, "answer": list(q.gold),
                     "q_entity": list(q.topic_entities), "a_entity": [a for a in q.gold if a in nodes],
                     "graph": triples, "choices": []})
    out.mkdir(parents=True, exist_ok=True)
    if jsonl:
        path = out / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        return path
    for k, part in enumerate(np.array_split(np.arange(len(rows)), shards)):
        table = pa.Table.from_pylist([rows[i] for i in part])
        pq.write_table(table, out / f"{split}-{k:05d}-of-{shards:05d}-0123abcd.parquet")
    return out


@pytest.fixture(scope="session")
def rog_writer() -> Callable[..., Path]:
    """:func:`write_rog`, for tests that need RoG-format data written from real questions and graphs."""
    return write_rog



@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) serving smollm2-135m as
    ``smollm2`` on 127.0.0.1; its ``/v1`` URL."""
    import subprocess
    import sys
    import time

    import httpx

    from kgwise.llm.llamacpp import resolve_model_path

    _, path = resolve_model_path("smollm2-135m")
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", "smollm2",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", "1",
             "--logits_all", "true", "--kv_overrides", "tokenizer.ggml.add_bos_token=bool:true"],
            stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"llama.cpp server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
