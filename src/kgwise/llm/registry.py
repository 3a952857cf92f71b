"""LLM backends by name: a backend is one class and one :func:`register_backend` call in its own module.

A spec ``PREFIX:REST`` (or ``PREFIX`` alone) goes to the backend registered under ``PREFIX``, whose factory
gets ``REST`` (``""`` for the bare prefix). A spec with no registered prefix goes to the first backend whose
``claims`` accepts it (llama.cpp claims its short model names and paths ending in ``.gguf``). The built-in
backends register when :mod:`kgwise.llm` is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgwise.errors import ConfigError

if TYPE_CHECKING:
    from kgwise.llm.base import LLM

__all__ = ["BACKENDS", "Backend", "backend_for", "register_backend"]


@dataclass(frozen=True, slots=True)
class Backend:
    """``factory(rest)`` builds the LLM of the spec ``prefix:rest``; ``usage``: the spec's form in error
    messages (``openai:MODEL``); ``claims``: the specs without a prefix it also answers to."""

    prefix: str
    factory: Callable[[str], LLM]
    usage: str
    claims: Callable[[str], bool] | None = None


BACKENDS: dict[str, Backend] = {}
"""Registered backends by prefix, in registration order."""


def register_backend(prefix: str, factory: Callable[[str], LLM], *, usage: str | None = None,
                     claims: Callable[[str], bool] | None = None) -> Backend:
    """Make ``prefix:…`` specs build their LLM with ``factory`` (see the module docstring); a prefix
    registered twice, empty or holding ``:`` is an error."""
    if not prefix or ":" in prefix or prefix != prefix.strip():
        raise ConfigError(f"LLM backend prefix {prefix!r} must be a non-empty word without ':'")
    if prefix in BACKENDS:
        raise ConfigError(f"LLM backend {prefix!r} is registered twice")
    backend = BACKENDS[prefix] = Backend(prefix, factory, usage or f"{prefix}:SPEC", claims)
    return backend


def backend_for(spec: str) -> tuple[Backend, str]:
    """The backend of ``spec`` and the text its factory gets; ``ConfigError`` listing the registered forms
    for a spec no backend takes."""
    prefix, colon, rest = spec.partition(":")
    found = BACKENDS.get(prefix)
    if found is not None:
        return found, rest if colon else ""
    for backend in BACKENDS.values():
        if backend.claims is not None and backend.claims(spec):
            return backend, spec
    forms = ", ".join(b.usage for b in BACKENDS.values()) or "none registered"
    raise ConfigError(f"unknown LLM {spec!r}: use one of {forms}")
