"""Retries of service calls (LLM APIs, SPARQL endpoints) with exponential back-off and full jitter,
honouring the server's ``Retry-After``."""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kgwise.errors import ServiceError, TransientError

if TYPE_CHECKING:
    import httpx

__all__ = ["RetryPolicy", "RetryStats", "call_with_retry", "parse_retry_after", "send_once"]

T = TypeVar("T")

RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before trying a failed call again.

    Attempt ``k`` (0-based) that failed without a ``Retry-After`` waits ``uniform(0, min(max_delay_s,
    base_delay_s · multiplier^k))`` ("full jitter"); with a ``Retry-After`` of ``r`` seconds it waits
    ``min(r, max_retry_after_s)`` plus a jitter of up to ``base_delay_s``. ``timeout_s`` bounds each
    request; ``max_retries`` the retries after the first attempt.
    """

    max_retries: int = 6
    base_delay_s: float = 0.5
    multiplier: float = 2.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 120.0
    timeout_s: float = 120.0
    statuses: frozenset[int] = RETRY_STATUSES

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay_s < 0 or self.multiplier < 1 or self.timeout_s <= 0:
            raise ValueError("RetryPolicy: need max_retries ≥ 0, base_delay_s ≥ 0, multiplier ≥ 1, "
                             "timeout_s > 0")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s) + rng.uniform(0.0, self.base_delay_s)
        cap = min(self.max_delay_s, self.base_delay_s * self.multiplier**attempt)
        return rng.uniform(0.0, cap)


@dataclass
class RetryStats:
    """Thread-safe counters: requests sent, retries, and retries by reason."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, *, retry_reason: str | None = None, failed: bool = False) -> None:
        with self._lock:
            self.requests += 1
            if retry_reason is not None:
                self.retries += 1
                self.reasons[retry_reason] = self.reasons.get(retry_reason, 0) + 1
            if failed:
                self.failures += 1

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            return {"requests": self.requests, "retries": self.retries, "failures": self.failures,
                    "reasons": dict(self.reasons)}


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` (seconds or an HTTP date)."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def send_once(send: Callable[[], httpx.Response], where: str, policy: RetryPolicy,
              transient: type[TransientError]) -> httpx.Response:
    """One HTTP attempt: ``send()``'s response, or ``transient`` (named after ``where``) for a timeout, a
    dropped connection or a status in ``policy.statuses`` (with the server's ``Retry-After``). Other error
    statuses are the caller's to judge."""
    import httpx

    try:
        resp = send()
    except httpx.TimeoutException as exc:
        raise transient(f"timeout: {where}: {exc}") from exc
    except httpx.TransportError as exc:
        raise transient(f"connection: {where}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code in policy.statuses:
        raise transient(f"HTTP {resp.status_code} from {where}: {resp.text[:200]}", status=resp.status_code,
                        retry_after=parse_retry_after(resp.headers))
    return resp


def _reason(exc: TransientError) -> str:
    return f"http_{exc.status}" if exc.status is not None else (str(exc).split(":", 1)[0] or "transient")


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    stats: RetryStats | None = None,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run ``fn`` until it succeeds; retry on ``TransientError`` up to ``policy.max_retries`` times.

    Returns ``(result, attempts)``. Raises the transient error's ``fatal`` type (``LLMError`` for an LLM)
    naming the last failure when retries run out; any other exception propagates at once.
    """
    rng = rng if rng is not None else random.Random()
    attempt = 0
    while True:
        try:
            result = fn()
        except TransientError as exc:
            if attempt >= policy.max_retries:
                if stats is not None:
                    stats.record(failed=True)
                raise exc.fatal(f"gave up after {attempt + 1} attempts: {exc}") from exc
            if stats is not None:
                stats.record(retry_reason=_reason(exc))
            sleep(policy.delay(attempt, exc.retry_after, rng))
            attempt += 1
            continue
        except ServiceError:
            if stats is not None:
                stats.record(failed=True)
            raise
        if stats is not None:
            stats.record()
        return result, attempt + 1
