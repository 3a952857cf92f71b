"""What every bandit policy of kgwise speaks (the shape of river's and mabwiser's policies).

Arms are labels (``str`` or ``int``, so that a state survives JSON). :meth:`Policy.pull` picks an arm for
a context (``None`` where a budgeted policy can afford none), :meth:`Policy.update` learns the reward of
an arm on a context, and :meth:`Policy.state_dict` / :meth:`Policy.from_state_dict` round-trip the whole
policy, its random generator included, so a restored policy pulls exactly as the original would have.
A policy may ask more of a pull or an update (a router takes each arm's cost bound, and the cost spent).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, write_text_atomic

__all__ = ["ArmT", "Policy", "arm_labels"]

ArmT = TypeVar("ArmT", bound=str | int)


def arm_labels(arms: int | Sequence[ArmT], owner: str) -> tuple[Any, ...]:
    """``arms`` as a tuple of labels: ``0 … n−1`` for an int ``n``; ``ConfigError`` naming ``owner`` for
    no arm, a repeated label or a label that is neither ``str`` nor ``int``."""
    labels: tuple[Any, ...] = tuple(range(arms)) if isinstance(arms, int) else tuple(arms)
    if not labels:
        raise ConfigError(f"{owner} needs at least one arm")
    bad = [a for a in labels if isinstance(a, bool) or not isinstance(a, str | int)]
    if bad:
        raise ConfigError(f"{owner}: arm labels must be str or int, got {bad[0]!r}")
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{owner}: arm labels must be unique, got {list(labels)}")
    return labels


class Policy(ABC, Generic[ArmT]):
    """A bandit over labelled arms: ``pull`` / ``update`` / state round trip."""

    def __init__(self, arms: int | Sequence[ArmT]) -> None:
        self._arms: tuple[ArmT, ...] = arm_labels(arms, type(self).__name__)
        self._index = {a: i for i, a in enumerate(self._arms)}

    @property
    def arms(self) -> tuple[ArmT, ...]:
        """The arm labels, in the order of the policy's arrays."""
        return self._arms

    @property
    def n_arms(self) -> int:
        return len(self._arms)

    def index(self, arm: ArmT) -> int:
        """Position of ``arm`` among :attr:`arms`; ``ConfigError`` listing them for an unknown label."""
        try:
            return self._index[arm]
        except (KeyError, TypeError):
            raise ConfigError(f"{type(self).__name__} has no arm {arm!r}; arms: "
                              f"{', '.join(map(str, self._arms))}") from None

    @abstractmethod
    def pull(self, context: Any, /, *args: Any, **kwargs: Any) -> ArmT | None:
        """The arm to play for ``context`` (``None``: a budgeted policy can afford no arm)."""

    @abstractmethod
    def update(self, arm: ArmT, context: Any, reward: float, /, *args: Any, **kwargs: Any) -> None:
        """Learn that ``arm`` earned ``reward`` on ``context``."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume identically, generator state included (JSON-serialisable)."""

    @classmethod
    @abstractmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`state_dict`; ``ConfigError`` for a state that is not this policy's."""

    def save(self, path: str | Path) -> Path:
        """Write :meth:`state_dict` as JSON (atomically: temp file, then rename)."""
        write_text_atomic(path, json.dumps(self.state_dict()))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Inverse of :meth:`save`; ``DataError`` naming the file when it is missing, not JSON or not this
        policy's state."""
        try:
            return cls.from_state_dict(read_json(path))
        except ConfigError as exc:
            raise DataError(str(exc), path) from exc
