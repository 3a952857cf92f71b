"""The price table and the compute proxy."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.llm.prices import Price, PriceTable, compute_proxy, default_prices


def test_bundled_table_lists_the_common_models() -> None:
    t = default_prices()
    names = ["gpt-4", "gpt-4o", "gpt-4o-mini", "gpt-3.5-turbo", "text-davinci-003", "qwen3-max", "llama-2-7b"]
    for name in names:
        assert t.lookup(name) is not None, name
    assert t.lookup("gpt-4") == Price(30.0, 60.0)
    assert t.cost("gpt-4", 1000, 500) == pytest.approx((1000 * 30 + 500 * 60) / 1e6)


def test_lookup_by_exact_name_or_alias_never_by_prefix() -> None:
    t = default_prices()
    assert t.lookup("gpt-4o-mini-2024-07-18") == t.lookup("gpt-4o-mini")  # a listed snapshot alias
    assert t.lookup("openai:gpt-4") == t.lookup("gpt-4")
    assert t.lookup("ChatGPT") == t.lookup("gpt-3.5-turbo")
    assert t.lookup("no-such-model") is None
    assert t.cost("no-such-model", 10, 10) is None
    # a name that merely starts like a listed model or alias is not that model
    for name in ("rogue-model", "gpt-4o-mini-ft", "gpt-4o-2024-05-13", "llama-2-7b-instruct-finetuned"):
        assert t.lookup(name) is None, name


def test_require_names_the_model_and_how_to_price_it() -> None:
    t = default_prices()
    assert t.require("gpt-4") == Price(30.0, 60.0)
    with pytest.raises(ConfigError, match=r"'rogue-model' \(arm 'x'\).*never by prefix.*KGWISE_PRICES"):
        t.require("rogue-model", "arm 'x'")


def test_user_table_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "p.toml"
    f.write_text('[models."my-model"]\ninput = 1.0\noutput = 2.0\n[aliases]\n"mine" = "my-model"\n')
    t = PriceTable.load(f)
    assert t.cost("mine", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert t.lookup("gpt-4") is None
    monkeypatch.setenv("KGWISE_PRICES", str(f))
    assert default_prices().lookup("my-model") == Price(1.0, 2.0)


@pytest.mark.parametrize(
    "text",
    ['[models."m"]\ninput = 1.0\n', '[models."m"]\ninput = "x"\noutput = 1\n',
     '[models."m"]\ninput = -1\noutput = 1\n', '[aliases]\n"a" = "missing"\n', "not toml ["],
)
def test_bad_tables_raise_config_error(tmp_path: Path, text: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        PriceTable.load(f)


def test_compute_proxy() -> None:
    assert compute_proxy(135_000_000, 100) == pytest.approx(1.35e10)
    with pytest.raises(ValueError):
        compute_proxy(-1, 1)
