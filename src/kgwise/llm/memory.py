"""Whether a GGUF model fits the machine's free memory, decided from its header before llama.cpp loads it.

The need is estimated as the file's size (llama.cpp maps the weights) + the f16 key/value cache of the
context window (2 × layers × ``n_ctx`` × KV heads × head size × 2 bytes; the head size is
``embedding_length / head_count`` unless the file states ``attention.key_length``) + the float32 logits of
one batch (``n_batch`` × vocabulary × 4 bytes, what choice scoring asks for). The free memory is Linux's
``MemAvailable``, lowered to the cgroup's remaining allowance where one is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kgwise.errors import ConfigError
from kgwise.llm.gguf import GGUFHeader

__all__ = ["MemoryNeed", "available_memory_bytes", "memory_need", "require_memory"]

_GIB = float(1 << 30)


@dataclass(frozen=True, slots=True)
class MemoryNeed:
    """The estimate's parts, in bytes."""

    weights: int
    kv_cache: int
    logits: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.logits

    def describe(self) -> str:
        return (f"{self.total / _GIB:.2f} GiB (weights {self.weights / _GIB:.2f} + context cache "
                f"{self.kv_cache / _GIB:.2f} + logits {self.logits / _GIB:.2f})")


def memory_need(header: GGUFHeader, n_ctx: int, n_batch: int) -> MemoryNeed:
    """The memory a llama.cpp context over ``header``'s file needs (see the module docstring)."""
    layers = header.arch_int("block_count") or 0
    heads = header.arch_int("attention.head_count") or 1
    kv_heads = header.arch_int("attention.head_count_kv") or heads
    head_size = header.arch_int("attention.key_length") or (header.arch_int("embedding_length") or 0) // heads
    vocab = header.metadata.get("tokenizer.ggml.tokens")
    n_vocab = vocab if isinstance(vocab, int) else len(vocab) if isinstance(vocab, list) else 0
    return MemoryNeed(weights=header.path.stat().st_size,
                      kv_cache=2 * layers * n_ctx * kv_heads * head_size * 2,
                      logits=n_batch * n_vocab * 4)


def _cgroup_left() -> int | None:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
    except OSError:
        return None
    if limit == "max":
        return None
    return max(0, int(limit) - int(used))


def available_memory_bytes() -> int | None:
    """Free memory for a new model (``MemAvailable``, capped by the cgroup's allowance); ``None`` where
    the system does not say (not Linux)."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    avail = next((int(ln.split()[1]) * 1024 for ln in lines if ln.startswith("MemAvailable:")), None)
    left = _cgroup_left()
    if avail is None:
        return left
    return avail if left is None else min(avail, left)


def require_memory(header: GGUFHeader, n_ctx: int, n_batch: int, available: int | None = None) -> MemoryNeed:
    """``ConfigError`` with the figures when the model needs more than ``available`` bytes (default: the
    machine's :func:`available_memory_bytes`; unknown: no check). Returns the estimate."""
    need = memory_need(header, n_ctx, n_batch)
    free = available_memory_bytes() if available is None else available
    if free is not None and need.total > free:
        raise ConfigError(f"{header.path.name} ({header.name or header.architecture}) needs about "
                          f"{need.describe()} with n_ctx={n_ctx}, n_batch={n_batch}, but only "
                          f"{free / _GIB:.2f} GiB is available: refused before loading; close other "
                          "programs, lower n_ctx, or choose a smaller model")
    return need
