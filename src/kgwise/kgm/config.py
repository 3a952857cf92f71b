"""The KG model's config values (``[kgm_model]``, ``[kgm_train]``), apart from torch so that reading them
is cheap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kgwise.errors import ConfigError
from kgwise.settings import table

__all__ = ["ModelConfig", "TrainConfig"]


@table("kgm_model")
@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Sizes of the model. ``kind``: ``graph`` (GraphQA) or ``text`` (TextQA, no graph).
    ``num_relations``: the KG's relation count (edge types are derived from it)."""

    kind: Literal["graph", "text"] = "graph"
    emb_dim: int = 384
    context_hidden: int = 256
    gnn_hidden: int = 64
    layers: int = 2
    heads: int = 4
    num_relations: int = 1
    dropout: float = 0.2

    def __post_init__(self) -> None:
        if self.kind not in ("graph", "text"):
            raise ConfigError(f"model kind must be 'graph' or 'text', got {self.kind!r}")
        if self.gnn_hidden % self.heads:
            raise ConfigError(f"gnn_hidden {self.gnn_hidden} not divisible by heads {self.heads}")
        if min(self.emb_dim, self.context_hidden, self.gnn_hidden, self.heads, self.num_relations) < 1:
            raise ConfigError(f"model sizes must be positive: {self}")
        if self.layers < 0 or not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"bad layers/dropout: {self}")


@table("kgm_train")
@dataclass(frozen=True, slots=True)
class TrainConfig:
    """Optimisation settings. ``max_minutes`` caps the wall time; ``patience`` epochs without a better dev
    accuracy stop training; the best dev epoch's weights are kept."""

    seed: int = 0
    epochs: int = 20
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    patience: int = 4
    max_minutes: float = 60.0
    eval_batch_size: int = 64
    threads: int = 1

    def __post_init__(self) -> None:
        at_least_one = ("epochs", "batch_size", "eval_batch_size", "threads", "patience")
        bad = [f"{k} must be ≥ 1, got {getattr(self, k)}" for k in at_least_one if getattr(self, k) < 1]
        bad += [f"{k} must be > 0, got {getattr(self, k)}" for k in ("lr", "max_minutes")
                if not getattr(self, k) > 0]
        if bad:
            raise ConfigError("; ".join(bad))
