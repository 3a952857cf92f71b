"""The pipeline's state behind one small protocol, and the backend a config chooses.

:class:`PipelineState` is what :class:`kgwise.app.pipeline.Pipeline` and :func:`kgwise.app.fit.fit` use of
their state: route a question and hold its cost bound (``select``), pay its answer and keep the decision
awaiting feedback (``record``), call a selection off (``cancel``), learn a feedback (``feedback``: the
router's sufficient statistics — LinUCB's ``A`` and ``b``, the clusters' Beta counts, Eq. 14's cost sums —
grow by the update's deltas), make what was acknowledged durable (``sync``), the calibrations that ``fit``
writes, the live coverage counts, and a snapshot (``save``) that a new router from ``fit`` replaces the
old one with. Two backends satisfy it:

* :class:`kgwise.app.state.StateDir` — a journalled folder owned by one process (the embedded default);
* :class:`kgwise.app.state_pg.PgState` — a PostgreSQL database shared by several processes (``[state] url``
  in ``kgwise.toml``): one router and one budget for every replica.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kgwise.app.calibration import HeldOutCalibration
from kgwise.app.config import Context, PipelineConfig
from kgwise.app.router import RouterAdapter
from kgwise.app.state import CoverageCount, Pending, Routed, StateDir

if TYPE_CHECKING:
    from kgwise.inject.bandit import PromptBandit

__all__ = ["PendingView", "PipelineState", "open_state", "state_health"]


class PendingView(Protocol):
    """The decisions awaiting feedback, by decision id (a dict in the folder, a table in PostgreSQL)."""

    def get(self, key: str, /) -> Pending | None: ...
    def __getitem__(self, key: str, /) -> Pending: ...
    def __iter__(self) -> Iterator[str]: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def values(self) -> Iterable[Pending]: ...
    def clear(self) -> None: ...


class PipelineState(Protocol):
    """What a pipeline needs of its state (module docstring)."""

    router: RouterAdapter
    context: Context

    @property
    def root(self) -> Path:
        """The local folder of the state's files (``fit``'s log and report, the calibrations)."""

    @property
    def config(self) -> PipelineConfig: ...
    @property
    def pending(self) -> PendingView: ...
    @property
    def settled(self) -> Collection[str]: ...
    @property
    def expired(self) -> int: ...
    @property
    def coverage(self) -> dict[str, CoverageCount]: ...
    @property
    def calibration(self) -> HeldOutCalibration | None: ...
    calibration_problem: str | None
    @property
    def uag_file(self) -> Path: ...
    @property
    def calibration_file(self) -> Path: ...

    @property
    def read_only(self) -> str | None:
        """Why the state cannot be written now (None: it can)."""

    @property
    def warnings(self) -> list[str]:
        """What opening the state found and repaired."""

    @property
    def routed(self) -> Mapping[str, Routed]:
        """External arms' decisions awaiting their settle."""

    def check_writable(self) -> None: ...
    def select(self, decision: str, x: list[float], costs: dict[str, float]) -> str | None: ...
    def record(self, pending: Pending) -> None: ...
    def cancel(self, decision: str, charged: float = 0.0) -> None: ...
    def replace_router(self, router: RouterAdapter, context: Context) -> None: ...
    def feedback(self, decision: str, reward: float, observed: dict[str, float], covered: bool | None
                 ) -> None: ...
    def sync(self) -> None: ...
    def save(self) -> None: ...
    def close(self) -> None: ...
    def prompt_bandit_file(self, arm: str) -> Path: ...
    def prompt_bandit(self, arm: str) -> PromptBandit | None: ...
    def save_prompt_bandit(self, arm: str, bandit: PromptBandit | None) -> None: ...
    def save_calibration(self, calibration: HeldOutCalibration) -> None: ...


def open_state(root: Path, config: PipelineConfig, dim: int, refit: bool = False) -> PipelineState:
    """The state ``config`` names: its ``[state] url``'s database (``root`` then holds the local copies of
    the calibration files), else the folder ``root``; ``dim``: the question encoder's dimension;
    ``refit``: a folder made for other arms opens for ``fit`` to replace its router."""
    if config.state.url is None:
        return StateDir(root, config, dim, refit=refit)
    from kgwise.app.state_pg import PgState

    return PgState(config.state.url, root, config, dim, timeout_s=config.state.timeout_s)


def state_health(state: PipelineState) -> dict[str, Any]:
    """Where the state lives and whether it answers: the folder's path, or the database (without its
    password), its schema version and the round-trip time of a query — ``ok`` false with the error when it
    does not answer in time."""
    from kgwise.app.state_pg import PgState

    if isinstance(state, PgState):
        return state.health()
    return {"backend": "folder", "path": str(state.root), "ok": True}
