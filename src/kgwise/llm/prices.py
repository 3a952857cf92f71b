"""Prices of API models (USD per million tokens) and a compute proxy for local models.

The table ships as ``kgwise/data/prices.toml`` (sources and dates in its header); a user file given by
path or ``$KGWISE_PRICES`` replaces it. A model is priced only by its exact name (after dropping a
provider prefix such as ``openai:`` and case) or an alias the table lists — never by a prefix: a name
that merely starts like a listed model (``rogue-model`` and ``rog``, ``gpt-4o-mini-ft`` and
``gpt-4o-mini``) may be priced quite differently, and a wrong price would silently skew every budget.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from kgwise.errors import ConfigError

__all__ = ["Price", "PriceTable", "compute_proxy", "default_prices"]

PRICES_ENV = "KGWISE_PRICES"


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per 1,000,000 input and output tokens."""

    input: float
    output: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


def _normalise(name: str) -> str:
    name = name.strip().lower()
    for prefix in ("openai:", "openai/", "models/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


@dataclass(frozen=True)
class PriceTable:
    """Model name → ``Price``; lookup by exact name, then alias (no prefix matching: module docstring)."""

    prices: dict[str, Price]
    aliases: dict[str, str]
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """Read a TOML table ``[models."NAME"] input=… output=…`` with optional ``[aliases]``."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(f"price table {p} does not exist") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"price table {p}: {exc}") from exc
        return cls._from_mapping(data, str(p))

    @classmethod
    def _from_mapping(cls, data: dict[str, object], source: str) -> PriceTable:
        models = data.get("models", {})
        if not isinstance(models, dict):
            raise ConfigError(f"price table {source}: [models] must be a table")
        prices: dict[str, Price] = {}
        for name, entry in models.items():
            if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
                raise ConfigError(f"price table {source}: model {name!r} needs numeric input and output")
            try:
                price = Price(float(entry["input"]), float(entry["output"]))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"price table {source}: model {name!r}: {exc}") from exc
            if price.input < 0 or price.output < 0:
                raise ConfigError(f"price table {source}: model {name!r} has a negative price")
            prices[_normalise(name)] = price
        raw_aliases = data.get("aliases", {})
        if not isinstance(raw_aliases, dict):
            raise ConfigError(f"price table {source}: [aliases] must be a table")
        aliases = {_normalise(k): _normalise(str(v)) for k, v in raw_aliases.items()}
        for alias, target in aliases.items():
            if target not in prices:
                raise ConfigError(f"price table {source}: alias {alias!r} names unlisted model {target!r}")
        return cls(prices, aliases, source)

    def lookup(self, model: str) -> Price | None:
        """The price of ``model`` (exact name or alias), or ``None`` when the table does not list it."""
        name = _normalise(model)
        return self.prices.get(self.aliases.get(name, name))

    def require(self, model: str, what: str = "") -> Price:
        """The price of ``model``; ``ConfigError`` naming it and how to give its price when the table does
        not list it (``what``: where the name comes from, e.g. ``"arm 'gnn' of log.jsonl"``)."""
        price = self.lookup(model)
        if price is None:
            where = f" ({what})" if what else ""
            raise ConfigError(
                f"model {model!r}{where} is not in the price table {self.source or '(bundled)'}: prices are "
                f"looked up by exact name or alias, never by prefix. Give its price in a TOML file "
                f'([models."{model}"] input = USD_PER_1M_INPUT_TOKENS, output = USD_PER_1M_OUTPUT_TOKENS, '
                f'or [aliases] "{model}" = "LISTED-MODEL") named by ${PRICES_ENV}, or give the cost '
                "itself instead of token usage")
        return price

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """Dollar cost of one call, or ``None`` for an unlisted model."""
        price = self.lookup(model)
        return None if price is None else price.cost(input_tokens, output_tokens)


@lru_cache(maxsize=8)
def _load_cached(path: str) -> PriceTable:
    if path == "<bundled>":
        text = resources.files("kgwise").joinpath("data/prices.toml").read_text(encoding="utf-8")
        return PriceTable._from_mapping(tomllib.loads(text), "kgwise/data/prices.toml")
    return PriceTable.load(path)


def default_prices(path: str | Path | None = None) -> PriceTable:
    """The price table at ``path``, else ``$KGWISE_PRICES``, else the bundled one."""
    chosen = path if path is not None else os.environ.get(PRICES_ENV)
    return _load_cached(str(chosen) if chosen else "<bundled>")


def compute_proxy(n_params: int, tokens: int) -> float:
    """Compute spent by a local model, as parameter-tokens ``n_params × tokens``.

    A forward pass costs about ``2 × n_params`` FLOPs per token, so FLOPs ≈ 2 × this proxy.
    """
    if n_params < 0 or tokens < 0:
        raise ValueError("n_params and tokens must be non-negative")
    return float(n_params) * float(tokens)
