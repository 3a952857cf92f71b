"""Test doubles for the conformal tests (as fixtures: the suite imports test modules by path)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest


class HashEncoder:
    """Test double for an ``Encoder``: a fixed pseudo-random unit vector per text (hash-seeded)."""

    dim = 8

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture(scope="session")
def encoder() -> HashEncoder:
    """A hash-seeded test-double encoder (fast, deterministic)."""
    return HashEncoder()
