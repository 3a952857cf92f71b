"""LLM backends behind one protocol: generate text, score answer choices, report ``Usage``.

``get_llm(spec)`` builds a backend from a short spec:

* ``smollm2-135m``, ``gemma3-270m``, ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-1.5b`` — models shipped on PyPI,
  run in-process by llama.cpp (:mod:`kgwise.llm.local_models`);
* ``gguf:PATH`` or a path ending in ``.gguf`` — any local GGUF file;
* ``openai:MODEL`` (or ``openai`` with ``$KGWISE_LLM_MODEL``) — the OpenAI API or any compatible server
  at ``$OPENAI_BASE_URL``;
* ``replay:SOURCE`` — recorded outputs of real models (see ``kgwise.llm.replay``).

Each backend registers its prefix with :func:`register_backend` (:mod:`kgwise.llm.registry`); a new one is
one class and one registration.
"""

from __future__ import annotations

from kgwise.errors import ConfigError
from kgwise.llm.base import (
    LLM,
    SCORING_RULES,
    ChoiceScores,
    Generation,
    LLMError,
    Message,
    ReplayMissError,
    ScoringRule,
    TransientLLMError,
    as_messages,
    scoring_rule,
    softmax,
)
from kgwise.llm.cache import CachedLLM, ResponseCache
from kgwise.llm.registry import BACKENDS, Backend, backend_for, register_backend

# the built-in backends register themselves (each module is one class and one registration)
from kgwise.llm import llamacpp, openai_compat, replay  # noqa: F401  isort: skip

__all__ = [
    "BACKENDS",
    "LLM",
    "SCORING_RULES",
    "Backend",
    "CachedLLM",
    "ChoiceScores",
    "Generation",
    "LLMError",
    "Message",
    "ReplayMissError",
    "ResponseCache",
    "ScoringRule",
    "TransientLLMError",
    "as_messages",
    "get_llm",
    "register_backend",
    "scoring_rule",
    "softmax",
]


def get_llm(spec: str, *, cache: bool | ResponseCache = False) -> LLM:
    """The backend named by ``spec`` (see the module docstring and :mod:`kgwise.llm.registry`); ``cache``
    puts it behind the persistent response cache (``True`` for the default file under
    ``kgwise.config.cache_dir()``)."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty LLM spec")
    backend, rest = backend_for(spec)
    llm = backend.factory(rest)
    if cache is False:
        return llm
    return CachedLLM(llm, cache if isinstance(cache, ResponseCache) else None)
