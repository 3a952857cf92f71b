"""Progress bars and run-time estimates for long commands (layer 0).

:func:`bar` is a tqdm bar that is off when the stream it writes to is not a terminal (logs, pipes, CI), so
redirected output holds no carriage-return noise. :func:`estimate` times a short warm-up of the real work
and extrapolates, so a command can say what it is about to cost before it spends it.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

__all__ = ["Estimate", "bar", "duration", "estimate", "estimate_steps", "interactive", "quiet_libraries"]


def interactive(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: stderr, where the bars go) is a terminal."""
    s = stream if stream is not None else sys.stderr
    isatty = getattr(s, "isatty", None)
    return bool(isatty and isatty())


def bar(*args: Any, enabled: bool | None = None, **kwargs: Any) -> Any:
    """A ``tqdm`` bar (same arguments), disabled when ``enabled`` is False or, by default, when its stream
    is not a terminal."""
    from tqdm import tqdm

    off = bool(kwargs.pop("disable", False))
    on = interactive(kwargs.get("file")) if enabled is None else enabled
    return tqdm(*args, disable=off or not on, **kwargs)


@dataclass(frozen=True, slots=True)
class Estimate:
    """``items`` of work, of which ``warmup_items`` took ``warmup_s`` seconds: about ``per_item_s`` each,
    ``remaining_s`` for the rest."""

    items: int
    warmup_items: int
    warmup_s: float

    @property
    def per_item_s(self) -> float:
        return self.warmup_s / self.warmup_items if self.warmup_items else 0.0

    @property
    def remaining_s(self) -> float:
        return self.per_item_s * max(0, self.items - self.warmup_items)

    def describe(self, what: str, calls_per_item: float = 0.0) -> str:
        """One line: how many ``what``, LLM calls (``calls_per_item`` each) and the expected time."""
        calls = f", about {round(self.items * calls_per_item):,} LLM calls" if calls_per_item else ""
        if not self.warmup_items:
            return f"{self.items:,} {what}{calls}"
        return (f"{self.items:,} {what}{calls}; the first {self.warmup_items} took {self.warmup_s:.1f} s "
                f"({self.per_item_s:.2f} s each): about {duration(self.remaining_s)} for the rest")


def duration(seconds: float) -> str:
    """``seconds`` as ``45 s``, ``12 min`` or ``3.2 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(n_items: int, warmup_fn: Callable[[], int], clock: Callable[[], float] = time.perf_counter
             ) -> Estimate:
    """Run ``warmup_fn`` (which does the first few of ``n_items`` for real and returns how many) and time
    it: the estimate of the whole from that measured warm-up."""
    t0 = clock()
    done = warmup_fn()
    took = clock() - t0
    if done < 0 or done > n_items:
        raise ValueError(f"warm-up did {done} of {n_items} items")
    return Estimate(n_items, done, took)


def estimate_steps(n_items: int, step: Callable[[int], object], min_items: int = 2, min_seconds: float = 1.0,
                   max_items: int = 10, clock: Callable[[], float] = time.perf_counter) -> Estimate:
    """Do items ``0, 1, …`` for real with ``step(i)`` until at least ``min_items`` and ``min_seconds`` are
    measured (at most ``max_items``, never more than ``n_items``): the estimate of the whole. Items served
    from a cache take no time; timing on until a second has passed keeps a few cached ones at the front
    from promising that the rest will be as quick."""
    t0 = clock()
    done = 0
    while done < min(n_items, max_items) and (done < min_items or clock() - t0 < min_seconds):
        step(done)
        done += 1
    return Estimate(n_items, done, clock() - t0)


QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub's and transformers' "Loading weights" bars
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "TOKENIZERS_PARALLELISM": "false",  # tokenizers' fork warning
    "ORT_LOGGING_LEVEL": "3",  # onnxruntime: errors only
}
"""Environment that silences the libraries kgwise loads (set before they are imported)."""


def quiet_libraries() -> None:
    """Keep third-party progress bars and log lines out of a command's output: the environment above, and
    Python's warnings and log records of those libraries at error level. The ``kgwise`` command calls it
    unless ``--verbose``; llama.cpp's own log is off where models load (``verbose=False``)."""
    import logging

    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    for name in ("transformers", "sentence_transformers", "huggingface_hub", "onnxruntime", "torch",
                 "llama-cpp-python", "httpx", "matplotlib", "faiss"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(transformers|sentence_transformers|huggingface_hub|torch)\b")
