"""π_θ: saving and loading a policy, and refusing files that are not one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kgwise.errors import DataError
from kgwise.extract.path_agent import PathAgentConfig, PathPolicy


def test_policy_save_load_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    policy = PathPolicy(dim=8, hidden=16)
    with torch.no_grad():
        policy.scalar_weights.fill_(0.7)
    cfg = PathAgentConfig(max_steps=4)
    path = policy.save(tmp_path / "p.pt", cfg, {"reach": 0.5})
    loaded, cfg2, meta = PathPolicy.load(path)
    assert cfg2 == cfg and meta == {"reach": 0.5}
    s, a, m = torch.randn(3, 16), torch.randn(3, 5, 19), torch.ones(3, 5, dtype=torch.bool)
    assert torch.allclose(policy(s, a, m)[0], loaded(s, a, m)[0])
    with pytest.raises(DataError, match="not found"):
        PathPolicy.load(tmp_path / "missing.pt")
    blob = torch.load(path, weights_only=True)
    del blob["scalars"]  # a file of a kgwise before the 'ahead' action feature
    torch.save(blob, tmp_path / "old.pt")
    with pytest.raises(DataError, match=r"^\S*old\.pt: a policy of an older kgwise .* train it again"):
        PathPolicy.load(tmp_path / "old.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(DataError, match=r"list\.pt: not a path-agent policy file: it holds a list"):
        PathPolicy.load(tmp_path / "list.pt")
    torch.save({"state_dict": {}, "optimiser": {}, "iteration": 3}, tmp_path / "p.ckpt")
    with pytest.raises(DataError, match=r"p\.ckpt: not a path-agent policy file: a training checkpoint"):
        PathPolicy.load(tmp_path / "p.ckpt")
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    with pytest.raises(DataError, match=r"bad\.pt: not a path-agent policy file"):
        PathPolicy.load(tmp_path / "bad.pt")
    (tmp_path / "text.pt").write_text("aspirin\ttreats\tpain\n")  # torch's unpickler: IndexError
    with pytest.raises(DataError, match=r"text\.pt: not a path-agent policy file: [^\n]*$"):
        PathPolicy.load(tmp_path / "text.pt")
