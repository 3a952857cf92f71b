"""LLM backends behind one protocol: generate text, score answer choices, report ``Usage``.

``get_llm(spec)`` builds a backend from a short spec:

* ``smollm2-135m``, ``gemma3-270m`` — models shipped on PyPI, run in-process by llama.cpp;
* ``gguf:PATH`` or a path ending in ``.gguf`` — any local GGUF file;
* ``openai:MODEL`` (or ``openai`` with ``$KGWISE_LLM_MODEL``) — the OpenAI API or any compatible server
  at ``$OPENAI_BASE_URL``;
* ``replay:SOURCE`` — recorded outputs of real models (see ``kgwise.llm.replay``).
"""

from __future__ import annotations

from pathlib import Path

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

__all__ = [
    "LLM",
    "SCORING_RULES",
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
    "scoring_rule",
    "softmax",
]


def get_llm(spec: str, *, cache: bool | ResponseCache = False) -> LLM:
    """The backend named by ``spec`` (see the module docstring); ``cache`` puts it behind the persistent
    response cache (``True`` for the default file under ``kgwise.config.cache_dir()``)."""
    spec = spec.strip()
    if not spec:
        raise ConfigError("empty LLM spec")
    llm: LLM
    if spec.startswith("openai"):
        from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig

        if spec not in {"openai"} and not spec.startswith("openai:"):
            raise ConfigError(f"bad LLM spec {spec!r}: use openai:MODEL")
        model = spec.split(":", 1)[1] if ":" in spec else None
        llm = OpenAICompatible(OpenAIConfig(model=model or None))
    elif spec.startswith("replay:"):
        from kgwise.llm.replay import Replay

        llm = Replay.from_spec(spec.split(":", 1)[1])
    else:
        from kgwise.llm.llamacpp import SHORT_NAMES, LlamaCpp

        if spec.startswith("gguf:"):
            llm = LlamaCpp(Path(spec[5:]))
        elif spec in SHORT_NAMES or spec.endswith(".gguf"):
            llm = LlamaCpp(spec)
        else:
            raise ConfigError(
                f"unknown LLM {spec!r}: use one of {sorted(SHORT_NAMES)}, gguf:PATH, openai:MODEL or "
                "replay:SOURCE"
            )
    if cache is False:
        return llm
    return CachedLLM(llm, cache if isinstance(cache, ResponseCache) else None)
