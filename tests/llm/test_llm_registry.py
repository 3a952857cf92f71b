"""The LLM backend registry: a new backend is one class and one registration; unknown specs list the forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.llm import BACKENDS, get_llm, registry
from kgwise.llm.replay import Replay


class FakeEchoLLM:
    """A stand-in backend: remembers the text its spec carried (unit test of the registry only)."""

    def __init__(self, rest: str) -> None:
        self.name = f"echo:{rest}"


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> dict[str, registry.Backend]:
    backends = dict(BACKENDS)
    monkeypatch.setattr(registry, "BACKENDS", backends)
    return backends


def test_the_built_in_backends_are_registered() -> None:
    assert list(BACKENDS)[:3] == ["gguf", "openai", "replay"]
    assert BACKENDS["replay"].factory == Replay.from_spec
    backend, rest = registry.backend_for("smollm2-135m")  # claimed without a prefix
    assert backend.prefix == "gguf" and rest == "smollm2-135m"
    assert registry.backend_for("/models/a:b.gguf") == (BACKENDS["gguf"], "/models/a:b.gguf")
    assert registry.backend_for("openai") == (BACKENDS["openai"], "")
    assert registry.backend_for("openai:gpt-4o-mini:2024") == (BACKENDS["openai"], "gpt-4o-mini:2024")


def test_a_new_backend_is_one_registration(isolated: dict[str, registry.Backend], tmp_path: Path) -> None:
    registry.register_backend("echo", FakeEchoLLM, usage="echo:TEXT")  # type: ignore[arg-type]
    llm = get_llm(" echo:hello ")
    assert isinstance(llm, FakeEchoLLM) and llm.name == "echo:hello"
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register_backend("echo", FakeEchoLLM)  # type: ignore[arg-type]
    for bad in ("", "a:b", " x"):
        with pytest.raises(ConfigError, match="without ':'"):
            registry.register_backend(bad, FakeEchoLLM)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown LLM 'nope:x': use one of gguf:PATH.*openai:MODEL, "
                                          r"replay:SOURCE, echo:TEXT$"):
        get_llm("nope:x")
    assert "echo" not in BACKENDS  # the isolated copy took it
