"""A persistent SQLite cache of LLM results and a wrapper that puts any ``LLM`` behind it.

The key hashes backend, model, kind of call (generate / score), prompt and parameters. A hit costs
nothing: its ``Usage`` has zero tokens, calls and cost, and ``cached_calls = 1``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgwise.config import cache_dir
from kgwise.llm.base import LLM, ChoiceScores, Generation, Message, as_messages, tunable
from kgwise.types import Usage

__all__ = ["CachedLLM", "ResponseCache", "cache_key"]


def cache_key(backend: str, model: str, kind: str, prompt: Any, params: dict[str, Any]) -> str:
    """SHA-256 of a canonical JSON of everything that determines the result."""
    blob = json.dumps(
        {"backend": backend, "model": model, "kind": kind, "prompt": prompt, "params": params},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Key → JSON value store in one SQLite file (WAL mode; safe across threads and processes)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir() / "llm_cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                "created REAL NOT NULL)"
            )
            self._conn.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, value, created) VALUES (?, ?, ?)",
                (key, json.dumps(value, ensure_ascii=False), time.time()),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def clear(self) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM responses")
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _hit_usage(start: float) -> Usage:
    return Usage(latency_s=time.perf_counter() - start, cached_calls=1)


class CachedLLM:
    """An ``LLM`` that answers from ``cache`` when it can and asks ``inner`` (then stores) otherwise.

    Sampled generations (``temperature > 0``) are not cached unless ``cache_sampled`` is set, since a
    replayed sample would hide the randomness the caller asked for.
    """

    def __init__(
        self, inner: LLM, cache: ResponseCache | None = None, *, cache_sampled: bool = False
    ) -> None:
        self.inner = inner
        self.cache = cache if cache is not None else ResponseCache()
        self.cache_sampled = cache_sampled
        self.name = inner.name
        self._backend = type(inner).__name__

    @property
    def honours_settings(self) -> bool:
        return tunable(self.inner)

    def generate(
        self,
        prompt: str | Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        **settings: Any,
    ) -> Generation:
        """The cached reply, else ``inner``'s; ``settings`` (``top_p``, ``seed``, ``on_text``: a
        :func:`~kgwise.llm.base.tunable` backend's) go to ``inner`` and, but for ``on_text``, into the key;
        a cached reply reaches ``on_text`` as one piece."""
        start = time.perf_counter()
        use = temperature == 0.0 or self.cache_sampled
        msgs = [m.to_dict() for m in as_messages(prompt)] if not isinstance(prompt, str) else prompt
        on_text = settings.get("on_text")
        params = {"max_tokens": max_tokens, "temperature": temperature, "stop": list(stop or []),
                  **{k: v for k, v in settings.items() if k != "on_text" and v is not None}}
        key = cache_key(self._backend, self.name, "generate", msgs, params)
        if use:
            hit = self.cache.get(key)
            if hit is not None:
                g = Generation.from_dict(hit)
                if on_text is not None and g.text:
                    on_text(g.text)
                return Generation(g.text, _hit_usage(start), g.finish_reason, g.token_logprobs,
                                  g.top_logprobs, attempts=0)
        inner: Any = self.inner  # a tunable backend's generate takes the settings too
        out = inner.generate(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, **settings)
        if use:
            self.cache.put(key, out.to_dict())
        return out

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        start = time.perf_counter()
        key = cache_key(self._backend, self.name, "score", {"context": context, "choices": list(choices)}, {})
        hit = self.cache.get(key)
        if hit is not None:
            s = ChoiceScores.from_dict(hit)
            return ChoiceScores(s.logprobs, s.normalised, _hit_usage(start), s.token_counts, s.method)
        out = self.inner.score_choices(context, choices)
        self.cache.put(key, out.to_dict())
        return out

    def __getattr__(self, attr: str) -> Any:
        # expose the wrapped backend's extras (n_params, stats, …)
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)
