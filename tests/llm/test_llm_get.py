"""``get_llm`` specs and configuration errors (no model is loaded here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.llm import CachedLLM, get_llm
from kgwise.llm.llamacpp import default_threads, resolve_model_path
from kgwise.llm.openai_compat import OpenAICompatible


def test_unknown_specs_are_config_errors() -> None:
    for spec in ["", "gpt-5000", "openaix:foo", "gguf:/nonexistent/model.gguf", "replay:nope"]:
        with pytest.raises(ConfigError):
            get_llm(spec)


def test_openai_spec_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("KGWISE_LLM_MODEL", raising=False)
    with pytest.raises(ConfigError, match="KGWISE_LLM_MODEL"):
        get_llm("openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_llm("openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("KGWISE_LLM_MODEL", "local-model")
    llm = get_llm("openai")
    assert isinstance(llm, OpenAICompatible)
    assert llm.name == "openai:local-model" and llm.base_url == "http://127.0.0.1:9/v1" and not llm.priced
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL")
    cached = get_llm("openai:gpt-4o-mini", cache=True)
    assert isinstance(cached, CachedLLM) and cached.name == "openai:gpt-4o-mini" and cached.priced
    assert cached.cache.path == tmp_path / "llm_cache.sqlite"


def test_threads_and_model_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGWISE_LLM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("KGWISE_LLM_THREADS", "zero")
    with pytest.raises(ConfigError):
        default_threads()
    monkeypatch.delenv("KGWISE_LLM_THREADS")
    assert default_threads() >= 1
    name, path = resolve_model_path("smollm2-135m")
    assert name == "smollm2-135m" and path.suffix == ".gguf" and path.stat().st_size > 50_000_000
