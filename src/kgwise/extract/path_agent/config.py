"""P_RL's hyper-parameters (KnowGPT §3.1), the ``[path_agent]`` config table; no PyTorch here, so reading
a config file stays cheap."""

from __future__ import annotations

from dataclasses import dataclass

from kgwise.errors import ConfigError
from kgwise.settings import table

__all__ = ["SCALARS", "PathAgentConfig"]

SCALARS = ("cosine to target", "inverse edge", "ahead")
"""The scalar action features, in order (after the neighbour and relation embeddings)."""


@table("path_agent")
@dataclass(frozen=True)
class PathAgentConfig:
    """Hyper-parameters of P_RL. ``λ1 = λ2 = λ3 = 1``: the paper leaves them open. ``max_steps`` is K of
    Eq. 2. ``shape_reach`` adds λ1·(Φ(s') − Φ(s)) to each step, Φ = 1
    while a choice is within the remaining steps (potential-based shaping, Ng et al. 1999): the best
    policy is unchanged, and a step that leaves every way to the choices is charged at once.
    ``batch_walks``: walks that can reach their choice per policy-gradient update (whole questions are
    added until there are at least that many)."""

    max_steps: int = 3
    lambda_reach: float = 1.0
    lambda_context: float = 1.0
    lambda_concise: float = 1.0
    shape_reach: bool = True
    max_actions: int = 24
    prefilter: int = 64
    max_sources: int = 4
    node_text_edges: int = 2
    hidden: int = 256
    learning_rate: float = 3e-3  # the scalar feature weights learn 10× faster
    entropy_weight: float = 0.01
    value_weight: float = 0.5
    batch_walks: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigError(f"PathAgentConfig.max_steps must be ≥ 1, got {self.max_steps}")
        if self.max_actions < 1 or self.prefilter < self.max_actions:
            raise ConfigError("PathAgentConfig: need 1 ≤ max_actions ≤ prefilter")
        if self.max_sources < 1 or self.batch_walks < 1 or self.hidden < 1:
            raise ConfigError("PathAgentConfig: max_sources, batch_walks and hidden must be ≥ 1")

