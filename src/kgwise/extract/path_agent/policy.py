"""The policy network π_θ(a|s) of P_RL and its value head (PyTorch), saved and loaded with its config."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import asdict
from pathlib import Path as FilePath
from typing import Any

import torch
from torch import nn

from kgwise.errors import DataError
from kgwise.extract.path_agent.config import SCALARS, PathAgentConfig
from kgwise.files import atomic_path

__all__ = ["PathPolicy"]


class PathPolicy(nn.Module):
    """π_θ(a|s): bilinear score between an MLP of the state (Eq. 1) and the action features; a value
    head V(s) serves as the REINFORCE baseline."""

    def __init__(self, dim: int = 384, hidden: int = 256) -> None:
        super().__init__()
        self.dim, self.hidden = dim, hidden
        n = len(SCALARS)
        self.state_net = nn.Sequential(nn.Linear(2 * dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.action_net = nn.Sequential(nn.Linear(2 * dim + n, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.value_head = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))
        # direct weights on the scalar action features (SCALARS), so that the most informative ones are
        # not diluted among the 2d embedding inputs; they start at 0 (uniform)
        self.scalar_weights = nn.Parameter(torch.zeros(n))

    def forward(
        self, state: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``state (R, 2d)``, ``actions (R, A, 2d+3)``, ``mask (R, A)`` → masked logits ``(R, A)``, V(s)."""
        q = self.state_net(state)
        k = self.action_net(actions)
        logits = torch.einsum("rh,rah->ra", q, k) / math.sqrt(self.hidden)
        logits = logits + actions[..., 2 * self.dim :] @ self.scalar_weights
        logits = logits.masked_fill(~mask, -1e9)
        return logits, self.value_head(state).squeeze(-1)

    def save(
        self, path: str | FilePath, config: PathAgentConfig, meta: dict[str, Any] | None = None
    ) -> FilePath:
        """Write weights, the config and ``meta`` (training statistics) to ``path``."""
        with atomic_path(path) as tmp:
            torch.save({"dim": self.dim, "hidden": self.hidden, "scalars": list(SCALARS),
                        "config": asdict(config), "state_dict": self.state_dict(),
                        "meta": json.dumps(meta or {})}, tmp)
        return FilePath(path)

    @classmethod
    def load(cls, path: str | FilePath) -> tuple[PathPolicy, PathAgentConfig, dict[str, Any]]:
        """The policy, its config and its metadata from a file written by :meth:`save`."""
        path = FilePath(path)
        if not path.is_file():
            raise DataError("path-agent policy file not found", path)
        def refuse(exc: BaseException | str) -> DataError:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # torch's are long
            return DataError(f"not a path-agent policy file: {reason}", path)

        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except (IndexError, RuntimeError, TypeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            raise refuse(exc) from exc
        if not isinstance(blob, dict) or "state_dict" not in blob:
            raise refuse(f"it holds a {type(blob).__name__}, not a saved policy")
        if "optimiser" in blob:
            raise refuse("a training checkpoint; use the path_policy.pt that training writes beside it")
        if blob.get("scalars", list(SCALARS[:2])) != list(SCALARS):
            raise DataError("a policy of an older kgwise (its actions lack the 'ahead' feature); train it "
                            "again (kgwise eval knowgpt writes path_policy.pt)", path)
        try:
            policy = cls(int(blob["dim"]), int(blob["hidden"]))
            policy.load_state_dict(blob["state_dict"])
            config = PathAgentConfig(**blob["config"])
            meta = json.loads(blob.get("meta", "{}"))
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise refuse(exc) from exc
        policy.eval()
        return policy, config, meta


