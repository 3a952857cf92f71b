"""The routing service's per-arm cost bounds: the most one decision of an arm may hold.

A bound is given per arm (``ARM=COST``) or computed from the arm's price: an arm named like a model in the
price table (:mod:`kgwise.llm.prices`) costs at most ``price.cost(max_input_tokens, max_output_tokens)``
for one call. Clients' declared bounds are capped by these (:class:`kgwise.route.service.RoutingService`),
so that no client can hold more of the budget than the dearest call an arm can make.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kgwise.errors import ConfigError
from kgwise.llm.prices import PriceTable, default_prices

__all__ = ["TokenLimits", "cost_bounds", "parse_arm_costs", "parse_token_limits"]


@dataclass(frozen=True, slots=True)
class TokenLimits:
    """The largest call an arm may make: prompt (input) and completion (output) tokens."""

    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if self.input_tokens < 0 or self.output_tokens < 0:
            raise ConfigError(f"token limits must be ≥ 0, got {self.input_tokens},{self.output_tokens}")


def parse_token_limits(spec: str, option: str = "--max-tokens") -> TokenLimits:
    """``"IN,OUT"`` (e.g. ``4096,512``) as :class:`TokenLimits`; ``ConfigError`` naming ``option``."""
    parts = spec.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return TokenLimits(int(parts[0]), int(parts[1]))
    except (ValueError, ConfigError) as exc:
        raise ConfigError(f"{option} {spec!r}: expected IN,OUT token counts ≥ 0, e.g. 4096,512") from exc


def parse_arm_costs(specs: Sequence[str], names: Sequence[str], option: str = "--max-cost"
                    ) -> dict[str, float]:
    """``ARM=COST`` options as a mapping (the last ``=`` splits: a name may hold one); ``ConfigError``
    naming the option that is malformed, names an unknown arm, or gives a cost that is not finite ≥ 0."""
    given: dict[str, float] = {}
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        try:
            cost = float(value)
        except ValueError:
            sep = ""
        if not sep or name not in names or not (math.isfinite(cost) and cost >= 0):
            raise ConfigError(f"{option} {spec!r}: expected ARM=COST with ARM one of {', '.join(names)} "
                              "and COST a finite number ≥ 0")
        given[name] = cost
    return given


def cost_bounds(names: Sequence[str], given: Mapping[str, float], limits: TokenLimits | None = None,
                prices: PriceTable | None = None, option: str = "--max-cost") -> list[float]:
    """One bound per arm in ``names``' order: the given one, else (with ``limits``) the arm's price for
    the largest call; ``ConfigError`` naming every arm left without a bound and why."""
    table = prices if prices is not None else default_prices()
    out: list[float] = []
    missing: list[str] = []
    for name in names:
        if name in given:
            out.append(float(given[name]))
            continue
        priced = table.cost(name, limits.input_tokens, limits.output_tokens) if limits is not None else None
        if priced is None:
            missing.append(name)
        else:
            out.append(priced)
    if missing:
        why = (f"not in the price table ({table.source or 'the bundled one'})" if limits is not None
               else "no --max-tokens to price it by")
        raise ConfigError(f"{option}: no bound for {', '.join(missing)} ({why}); give {option} ARM=COST "
                          "for each")
    return out
