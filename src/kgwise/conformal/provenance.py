"""What a calibration was made with, and the check that new answers are made the same way.

A conformal guarantee covers the pipeline whose scores were calibrated: the same KG, LLM and, for KnowGPT's
answer sets, the same extractor+format combination, choice-scoring rule, P_RL policy and prompt bandit. A
calibration file records them as ``made_with`` (plain strings); :func:`check_same_pipeline` refuses to
attach a calibrated set to answers of another pipeline unless the caller allows it, and then says why the
guarantee does not hold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kgwise.errors import ConfigError
from kgwise.kg.base import ArrayGraph, KnowledgeGraph
from kgwise.kg.sparql import SPARQLGraph

__all__ = ["check_same_pipeline", "graph_fingerprint"]


def graph_fingerprint(kg: KnowledgeGraph) -> str:
    """A graph's identity, independent of the file it was read from: a hash of the labels, relation names
    and edges of an in-memory graph (the same triples rebuilt give the same value), the URL of a SPARQL
    endpoint (whose data can change behind it)."""
    if isinstance(kg, ArrayGraph):
        digest = hashlib.sha1()
        for names in (kg.labels, kg.relations):
            digest.update("\n".join(names).encode("utf-8") + b"\0")
        for array in kg.all_edges():
            digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
        return f"sha1:{digest.hexdigest()[:16]}"
    if isinstance(kg, SPARQLGraph):
        return f"sparql:{kg.endpoint}"
    raise ConfigError(f"cannot fingerprint a {type(kg).__name__}: calibrate over a graph file or an endpoint")


def check_same_pipeline(made_with: Mapping[str, str | None] | None, now: Mapping[str, str | None],
                        source: str | Path, allow_mismatch: bool, option: str = "--allow-mismatch"
                        ) -> list[str]:
    """One line per part of ``now`` that differs from what the calibration was ``made_with`` (a
    calibration that records nothing, an older file, is one difference); ``ConfigError`` naming the
    calibration ``source`` and each difference unless ``allow_mismatch`` (then the caller must say the set
    carries no guarantee)."""
    if made_with is None:
        diffs = ["the calibration does not record what it was made with (an older file)"]
    else:
        diffs = [f"{key}: calibrated with {made_with.get(key)!r}, answering with {value!r}"
                 for key, value in now.items() if made_with.get(key) != value]
    if diffs and not allow_mismatch:
        raise ConfigError(f"{source} was calibrated on another pipeline, so its guarantee does not cover "
                          f"these answers ({'; '.join(diffs)}); recalibrate, or pass {option} to get sets "
                          "without the guarantee")
    return diffs
