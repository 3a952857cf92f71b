"""External arms: models the caller runs itself, routed by the pipeline's one router within its one budget.

:meth:`kgwise.app.Pipeline.route` grounds the question, lets the Coke router pick among the external arms
(Eq. 2 within the budget, Eq. 14) and holds the picked arm's cost bound; the caller runs that model and
reports with :meth:`~kgwise.app.Pipeline.settle` whether it was right and what it cost — the cost is paid
then (at most the bound: the budget holds only while costs stay within their bounds, so a larger one is
refused) and the router learns the outcome (Eq. 5, 11, 14). :meth:`~kgwise.app.Pipeline.cancel` calls off
a decision whose arm will not be run. A decision not settled within ``[router] external_ttl_s`` is called
off, as is the oldest when more than :data:`kgwise.app.state.PENDING_KEPT` wait, so that a caller that never
settles cannot hold the budget. Every step is an event of the state directory's journal
(:mod:`kgwise.app.state`): a restart keeps the waiting decisions, their holds and their clocks.

An arm's cost bound is its ``price`` (the most one call may cost); a caller may declare a lower one per
question (``costs``, by arm name: a short question on a per-token API), never a higher one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kgwise.app.config import PipelineConfig
from kgwise.errors import ConfigError
from kgwise.types import Serialisable

__all__ = ["Decision", "Settlement", "external_bounds", "grade"]


@dataclass(frozen=True, slots=True)
class Decision(Serialisable):
    """An external arm picked for a question: the id its settle names, the arm and its cluster, the cost
    bound it holds (in ``unit``), the budget left besides what is held, the KG entities the question was
    grounded to, and how long it waits for its settle (``expires_in_s``; None: for ever)."""

    decision: str
    question: str
    arm: str
    cluster: str
    bound: float
    unit: str
    remaining_budget: float
    question_entities: tuple[str, ...] = ()
    expires_in_s: float | None = None


@dataclass(frozen=True, slots=True)
class Settlement(Serialisable):
    """How an external decision ended: ``settled`` (``reward`` learnt, ``cost`` paid of its ``bound``) or
    ``cancelled`` (nothing paid, the bound released); the spending and the budget left after it."""

    decision: str
    arm: str
    outcome: Literal["settled", "cancelled"]
    reward: float | None
    cost: float
    bound: float
    spent: float
    remaining_budget: float
    observed: dict[str, float]


def external_bounds(config: PipelineConfig, costs: Mapping[str, float] | None, unreachable: float
                    ) -> dict[str, float]:
    """Each arm's cost bound for an external decision: an external arm's ``price``, or the lower bound
    ``costs`` declares for it; every other arm ``unreachable`` (the pipeline runs those itself, in
    :meth:`~kgwise.app.Pipeline.answer`). ``ConfigError`` naming ``costs.ARM`` for a bad one."""
    external = {a.name: a.per_call for a in config.arms if a.external}
    if not external:
        raise ConfigError("the config has no external arm (kind = \"external\": a model the caller runs); "
                          "route() picks among those")
    given = dict(costs or {})
    for name, value in given.items():
        if name not in external:
            raise ConfigError(f"costs.{name}: not an external arm (external arms: {', '.join(external)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value >= 0):
            raise ConfigError(f"costs.{name}: must be a finite number ≥ 0, got {value!r}")
    out = {a.name: unreachable for a in config.arms}
    for name, price in external.items():
        out[name] = min(float(given.get(name, price)), price)
    return out


def grade(correct: float, cost: float) -> tuple[float, float]:
    """``(reward, cost)`` of a settle, checked: ``correct`` true/false or a grade in [0, 1], ``cost`` a
    finite number ≥ 0 (``ConfigError`` naming the field)."""
    reward = float(correct)
    if not 0.0 <= reward <= 1.0:
        raise ConfigError(f"correct: must be true, false or a grade in [0, 1], got {correct!r}")
    value = float(cost)
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"cost: must be a finite number ≥ 0, got {cost!r}")
    return reward, value
