"""kgwise's exceptions: every one names what was wrong and where."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["ConfigError", "DataError", "InputTooLongError", "KgwiseError", "ServiceError", "SettingError",
           "StateUnavailableError", "TransientError", "UnknownNodeError", "listed"]


class KgwiseError(Exception):
    """Base class of every error kgwise raises on purpose."""


class DataError(KgwiseError, ValueError):
    """A malformed or missing input file; names the file and, where known, the line (1-based)."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{message}")


class ConfigError(KgwiseError, ValueError):
    """A bad configuration value or option."""


class SettingError(ConfigError):
    """A generation setting (``max_tokens``, ``temperature``, …) the answering arm cannot apply; ``param``
    names it (an HTTP client gets a 400 naming the parameter)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class UnknownNodeError(KgwiseError, KeyError):
    """A node label or id that the knowledge graph does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown node"


class ServiceError(KgwiseError, RuntimeError):
    """A model or data service (an LLM, a SPARQL endpoint) failed for good: a bad reply, a bad request,
    retries exhausted."""


class InputTooLongError(KgwiseError):
    """The input does not fit the model's context window (a request's fault, not the service's)."""


class TransientError(ServiceError):
    """A service failure worth retrying (HTTP 429/5xx, a dropped connection, a timeout, a malformed reply).

    ``status``: the HTTP status, if any; ``retry_after``: the server's ``Retry-After`` in seconds when it
    sent one; ``fatal``: the error :func:`kgwise.retry.call_with_retry` raises when retries run out.
    """

    fatal: type[ServiceError] = ServiceError

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ReplayMissError(KgwiseError, KeyError):
    """A replayed model or arm holds no recorded output for the asked question."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no recorded output"


class StateUnavailableError(KgwiseError):
    """The pipeline's shared state (its database) is down or too slow to answer in time: nothing was
    acknowledged, the request may be sent again after ``retry_after_s`` seconds (HTTP 503 with
    ``Retry-After``)."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def listed(items: Sequence[str], most: int = 5) -> str:
    """The first ``most`` of ``items`` for a message, with ``…`` when there are more."""
    return ", ".join(items[:most]) + (" …" if len(items) > most else "")
