"""Moving a pipeline's state between the folder and PostgreSQL, and upgrading a database's schema
(``kgwise state migrate``).

Folder → database: the folder is opened as a pipeline opens it (its journal replayed, its lock taken, so
a running ``kgwise serve`` on it refuses the move) and the database gets a first epoch whose base router
is the folder's router, the decisions awaiting feedback (in order), the settled ones, the live coverage
counts and the files ``fit`` wrote. Database → folder: the database's router (its base and every event)
is written as the folder's snapshot with the same decisions, counts and files; refused while replicas
hold bounds (questions being answered). Either way the target must hold no state yet.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgwise.app.config import PipelineConfig
from kgwise.app.router import RouterAdapter
from kgwise.app.state import CALIBRATION_FILE, JOURNAL_FILE, PROMPT_BANDITS, STATE_FILE, UAG_FILE, StateDir
from kgwise.app.state_pg import PgState, migrate_schema, safe_url
from kgwise.errors import DataError, StateUnavailableError
from kgwise.files import read_json
from kgwise.types import Serialisable

__all__ = ["MigrationReport", "database_to_folder", "folder_to_database", "upgrade_database"]


@dataclass(frozen=True, slots=True)
class MigrationReport(Serialisable):
    """What a move carried: the source and target, the spend, decisions awaiting feedback and settled,
    questions the router has seen, and the files copied."""

    source: str
    target: str
    spent: float
    pending: int
    settled: int
    questions: int
    files: tuple[str, ...]


def encoder_dim(config: PipelineConfig, context: str, router_dim: int) -> int:
    """The question encoder's dimension behind a router of ``router_dim``-d contexts (the inverse of
    :func:`kgwise.app.router.context_width`; a ``free`` context does not read the embedding)."""
    if context == "question":
        return router_dim
    return router_dim - 3 - len(config.free_arms) if context == "question+free" else 0


def _connect(url: str, timeout_s: float) -> Any:
    import psycopg

    from kgwise.app.state_pg import _connect as connect

    try:
        return connect(url, timeout_s)
    except psycopg.OperationalError as exc:
        raise StateUnavailableError(f"cannot reach {safe_url(url)}: {str(exc).strip()}") from exc


def upgrade_database(url: str, timeout_s: float = 10.0) -> tuple[int, int]:
    """Bring the database's schema to this kgwise's version; ``(version found, version now)``."""
    from kgwise.app.state_pg import SCHEMA_VERSION

    with _connect(url, timeout_s) as conn, conn.transaction(), conn.cursor() as cur:
        found = migrate_schema(cur, url, upgrade=True)
    return found, SCHEMA_VERSION


def _files(root: Path) -> list[Path]:
    names = [root / CALIBRATION_FILE, root / UAG_FILE, *sorted((root / PROMPT_BANDITS).glob("*.npz"))]
    return [p for p in names if p.is_file()]


def folder_to_database(folder: Path, url: str, config: PipelineConfig, timeout_s: float = 10.0
                       ) -> MigrationReport:
    """Copy the state folder into an empty database (module docstring)."""
    if not (folder / STATE_FILE).is_file():
        raise DataError(f"no {STATE_FILE} to move (a folder left by a kill holds only its journal: open it "
                        "once, e.g. `kgwise status --state DIR`, to write its snapshot)", folder)
    body = read_json(folder / STATE_FILE)
    try:
        dim = encoder_dim(config, str(body.get("context", "question")), int(body["router"]["dim"]))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"not a kgwise pipeline state ({exc!r})", folder / STATE_FILE) from exc
    with StateDir(folder, config, dim) as st, _connect(url, timeout_s) as conn:
        with conn.transaction(), conn.cursor() as cur:
            migrate_schema(cur, url, upgrade=False)
            cur.execute("SELECT epoch FROM kgwise_ledger")
            if cur.fetchone() is not None:
                raise DataError("the database already holds a kgwise state: move into an empty database",
                                safe_url(url))
            if st.routed:  # the database keeps no external decision: their held bounds would never end
                raise DataError(f"{len(st.routed)} external decision(s) await `kgwise route settle` or "
                                "`kgwise route cancel`: settle or cancel them, then move the state", folder)
            router = st.router
            base = json.dumps({"router": router.state_dict(), "context": st.context})
            cur.execute("INSERT INTO kgwise_ledger VALUES (1, 1, %s, %s, %s, 0, %s)",
                        (base, router.budget, router.spent, st.expired))
            cur.executemany("INSERT INTO kgwise_pending (decision, body) VALUES (%s, %s)",
                            [(p.decision, p.to_json()) for p in st.pending.values()])
            cur.executemany("INSERT INTO kgwise_settled (decision) VALUES (%s)", [(d,) for d in st.settled])
            cur.executemany("INSERT INTO kgwise_coverage VALUES (%s, %s, %s, %s, %s, %s, %s)",
                            [(arm, c.n, c.covered, c.undetermined, c.graded, c.correct, c.uncertified)
                             for arm, c in st.coverage.items()])
            files = _files(folder)
            for path in files:
                cur.execute("INSERT INTO kgwise_files VALUES (%s, %s)",
                            (str(path.relative_to(folder)), path.read_bytes()))
        return MigrationReport(str(folder), safe_url(url), router.spent, len(st.pending), len(st.settled),
                               router.questions, tuple(str(p.relative_to(folder)) for p in files))


def database_to_folder(url: str, folder: Path, config: PipelineConfig, timeout_s: float = 10.0
                       ) -> MigrationReport:
    """Write the database's state into a folder that holds none (module docstring)."""
    if (folder / STATE_FILE).exists() or (folder / JOURNAL_FILE).exists():
        raise DataError("the folder already holds a state: move into a new folder", folder)
    with _connect(url, timeout_s) as conn:
        row = conn.execute("SELECT base FROM kgwise_ledger WHERE id = 1").fetchone()
    if row is None:
        raise DataError("the database holds no kgwise state", safe_url(url))
    base = json.loads(row[0])
    dim = encoder_dim(config, str(base.get("context", "question")), int(base["router"]["dim"]))
    with PgState(url, folder, config, dim, timeout_s=timeout_s) as pg:  # copies the files into the folder
        held = pg._read("SELECT count(*) FROM kgwise_holds")[0][0]
        if held:
            raise DataError(f"{held} question(s) are being answered by running replicas: stop them first",
                            safe_url(url))
        with StateDir(folder, config, dim) as st:
            st.router = RouterAdapter.from_state_dict(pg.router.state_dict())
            st.context = pg.context
            st.pending = OrderedDict((p.decision, p) for p in pg.pending.values())
            st.settled = OrderedDict((d, None) for d in pg.settled)
            st.coverage = dict(pg.coverage)
            st.expired = pg.expired
            report = MigrationReport(safe_url(url), str(folder), st.router.spent, len(st.pending),
                                     len(st.settled), st.router.questions,
                                     tuple(str(p.relative_to(folder)) for p in _files(folder)))
    return report
