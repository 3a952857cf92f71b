"""The pipeline's state in PostgreSQL: several ``kgwise serve`` replicas on one router and one budget.

Chosen by ``[state] url = "postgresql://…"`` in ``kgwise.toml``; satisfies
:class:`kgwise.app.store.PipelineState` as the folder does. Tables (schema version
:data:`SCHEMA_VERSION`, created on first use, in the URL's database and search path):

* ``kgwise_ledger`` (one row) — the epoch (a new one at every ``fit`` or migration), its base router
  (:meth:`kgwise.route.coke.CokeRouter.state_dict` and the router context, as ``fit`` left it), and the
  shared budget: ``spent``, ``reserved`` (bounds held by questions being answered), ``expired``;
* ``kgwise_events`` — every change to the router since the base, as a delta: ``select`` (a question seen:
  its cost bounds, Eq. 14's mean cost and the pacing horizon's count), ``charge`` (an answer paid: spend,
  the arm's cost and pulls), ``learn`` (a feedback: Eq. 5's Beta counts, Eq. 11's ``A`` and ``b``, Eq.
  14's graded and failure spend of the arm) and ``observe`` (a free arm's outcome). Each is a sum of
  per-update terms, so the router of a replica is the base plus the events in any order (Sherman–Morrison
  updates of ``A⁻¹`` in another order agree to float rounding);
* ``kgwise_holds`` — the cost bound held by each question being answered, with the lease of the replica
  answering it; ``kgwise_pending`` / ``kgwise_settled`` — decisions awaiting feedback (the newest
  :data:`~kgwise.app.state.PENDING_KEPT`) and settled ones; ``kgwise_coverage`` — live coverage counts per
  arm; ``kgwise_files`` — what ``fit`` writes beside the router (``calibration.json``, ``uag.json``, the
  prompt bandits), copied into the local folder ``root`` when a replica opens the state.

Guarantees:

* **One budget.** Every transaction that reserves or pays first locks the ledger row (``SELECT … FOR
  UPDATE``); a replica routes inside that transaction after reading every event committed before it, so
  its Eq. 14 check ``spent + reserved + bound ≤ allowance`` sees every replica's spending and holds; the
  reservation itself is a conditional ``UPDATE … WHERE spent + reserved + bound ≤ budget``, so the
  database refuses what would exceed the budget whatever a replica believes. Spend is paid in the
  transaction that records the answer; an answer is returned only once that transaction has committed.
* **Fresh statistics.** Event ids are drawn under the ledger lock, so they commit in id order and a
  reader that has seen id ``k`` has seen every event before it. A routing decision reads every update
  committed before it (a staleness of zero updates); reading the live coverage (``status``, a set's
  drift check) catches up when the last catch-up is ≥ :data:`REFRESH_S` old.
* **Feedback anywhere.** Decisions are rows: feedback reaches a decision whichever replica made it, and
  is taken once (the row is deleted in the transaction that learns from it).
* **No acknowledged work lost.** Each answer and feedback commits before it is acknowledged (PostgreSQL's
  synchronous commit); a replica killed mid-answer leaves a hold, which any replica releases once the
  dead replica's lease (a session advisory lock its connection held) is gone.
* **A fit anywhere.** ``fit`` through any replica starts a new epoch; every replica routes with its
  router from its next routing decision on, and takes up its calibration at the first moment none of
  its answers is between routing and record (so that each answer's set is made with the calibration its
  group was computed from). Prompt bandits and UAG's calibration are read when a replica starts.
* **Fail fast.** Connections, statements and lock waits are bounded by ``[state] timeout_s``; a database
  down or slow raises :class:`~kgwise.errors.StateUnavailableError` (HTTP 503 with ``Retry-After``), with
  nothing acknowledged; a pay or cancel that could not be written is written before the next operation,
  and the state resumes with the database.

A replica keeps its own random generator (Thompson draws, tie breaks) and, with ``pacing = "price"``,
its own window of recent selections; everything else a router reads is shared.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kgwise.app.calibration import HeldOutCalibration
from kgwise.app.config import CONTEXTS, Context, PipelineConfig
from kgwise.app.router import RouterAdapter, context_width
from kgwise.app.state import (
    CALIBRATION_FILE,
    PENDING_KEPT,
    SETTLED_KEPT,
    UAG_FILE,
    CoverageCount,
    Pending,
    Routed,
    StateFiles,
    coverage_delta,
    router_mismatch,
    write_prompt_bandit,
)
from kgwise.errors import ConfigError, DataError, StateUnavailableError
from kgwise.files import atomic_path, short_hash
from kgwise.route.coke import CokeRouter

if TYPE_CHECKING:
    import psycopg

    from kgwise.inject.bandit import PromptBandit

__all__ = ["REFRESH_S", "SCHEMA_VERSION", "PgState", "SharedCokeRouter", "apply_event", "migrate_schema",
           "safe_url"]

SCHEMA_VERSION = 2
REFRESH_S = 1.0
CHECKPOINT_EVENTS = 5000
"""Events after the base that make the next routing transaction write a new base (a checkpoint), so that
opening replays at most that many: a ``learn`` took 2.6 ms at d = 384 (2,000 of them through
``CokeRouter.learn`` on the 2-core machine at load average ≈ 20), about 13 s for 5,000 there."""
LOCK_SPACE = 0x6B67  # advisory-lock namespace of kgwise ("kg"); key 0: schema changes, others: leases

_V1 = """
CREATE TABLE IF NOT EXISTS kgwise_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS kgwise_ledger (
  id smallint PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, base text NOT NULL,
  budget double precision NOT NULL, spent double precision NOT NULL,
  reserved double precision NOT NULL, expired bigint NOT NULL DEFAULT 0,
  base_upto bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS kgwise_events (
  id bigserial PRIMARY KEY, epoch bigint NOT NULL, replica text NOT NULL, op text NOT NULL,
  arm text, x bytea, reward double precision, cost double precision, bound double precision);
CREATE INDEX IF NOT EXISTS kgwise_events_epoch ON kgwise_events (epoch, id);
CREATE TABLE IF NOT EXISTS kgwise_holds (
  decision text PRIMARY KEY, lease bigint NOT NULL, arm text NOT NULL, bound double precision NOT NULL);
CREATE TABLE IF NOT EXISTS kgwise_pending (
  decision text PRIMARY KEY, seq bigserial UNIQUE, body text NOT NULL);
CREATE TABLE IF NOT EXISTS kgwise_settled (decision text PRIMARY KEY, seq bigserial UNIQUE);
CREATE TABLE IF NOT EXISTS kgwise_coverage (
  arm text PRIMARY KEY, n bigint NOT NULL, covered bigint NOT NULL, undetermined bigint NOT NULL,
  graded bigint NOT NULL, correct bigint NOT NULL, uncertified bigint NOT NULL);
CREATE TABLE IF NOT EXISTS kgwise_files (name text PRIMARY KEY, body bytea NOT NULL);
"""
_V2 = """
ALTER TABLE kgwise_pending SET (toast_tuple_target = 8160);
ALTER TABLE kgwise_events SET (toast_tuple_target = 8160);
"""
"""A decision's body (~4.5 kB: its 384-d embedding in base64) and a feedback's context (3 kB) are kept in
their row, neither compressed nor moved to the TOAST table, up to a page (8,160 bytes; longer ones as
before): storing them out of line was 7 % of PostgreSQL's CPU per answer (`perf record` of the backend under
`kgwise bench serve --replicas`; docs/scale-out.md)."""
MIGRATIONS: tuple[str, ...] = (_V1, _V2)
"""``MIGRATIONS[v]`` brings a schema of version ``v`` to ``v + 1`` (version 0: no kgwise tables)."""

_COUNTS = ("n", "covered", "undetermined", "graded", "correct", "uncertified")
_LEDGER = "SELECT epoch, reserved, expired, base_upto FROM kgwise_ledger WHERE id = 1"
_LOCK = "SELECT 1 FROM kgwise_ledger WHERE id = 1 FOR UPDATE"
_EVENTS = ("SELECT id, replica, op, arm, x, reward, cost, bound FROM kgwise_events "
           "WHERE epoch = %s AND id > %s ORDER BY id")
Statement = tuple[str, "Mapping[str, Any] | tuple[Any, ...] | None"]
PREPARED: dict[str, tuple[str, str]] = {
    # name: (parameter types, statement): what every answer and feedback runs, parsed and planned once per
    # connection (PREPARE) and run as EXECUTE: a statement sent as text with its parameters quoted in it was
    # parsed, analysed and planned at every call, 42 % of PostgreSQL's CPU per answer (`perf record` of the
    # backend under `kgwise bench serve --replicas`; docs/scale-out.md)
    "kgwise_ledger_lock": ("", _LEDGER + " FOR UPDATE"),
    "kgwise_lock": ("", _LOCK),
    "kgwise_events_after": ("bigint, bigint", _EVENTS.replace("%s", "$1", 1).replace("%s", "$2", 1)),
    # reserve (the database's own check: never above the budget), hold, log
    "kgwise_reserve": (
        "float8, text, text, bigint, bigint, text, bytea",  # bound, arm, decision, lease, epoch, replica, x
        "WITH r AS (UPDATE kgwise_ledger SET reserved = reserved + $1 WHERE id = 1 AND $2::text IS NOT NULL "
        "AND spent + reserved + $1 <= budget RETURNING 1), "
        "h AS (INSERT INTO kgwise_holds SELECT $3, $4, $2, $1 FROM r RETURNING arm) "
        "INSERT INTO kgwise_events (epoch, replica, op, arm, x) "
        "SELECT $5, $6, 'select', (SELECT arm FROM h), $7 RETURNING arm"),
    # release the hold, keep the decision awaiting feedback (the oldest beyond `kept` expire), pay, log
    "kgwise_pay": (
        "text, text, bigint, float8, bigint, text, text, float8",  # decision, body, kept, cost, epoch,
        "WITH h AS (DELETE FROM kgwise_holds WHERE decision = $1 RETURNING bound), "  # replica, arm, bound
        "p AS (INSERT INTO kgwise_pending (decision, body) SELECT $1, $2 WHERE $2 IS NOT NULL "
        "RETURNING seq), "
        "x AS (DELETE FROM kgwise_pending WHERE seq <= (SELECT max(seq) FROM p) - $3 RETURNING 1), "
        "u AS (UPDATE kgwise_ledger SET spent = spent + $4, "
        "reserved = greatest(reserved - coalesce((SELECT sum(bound) FROM h), 0), 0), "
        "expired = expired + (SELECT count(*) FROM x) WHERE id = 1) "
        "INSERT INTO kgwise_events (epoch, replica, op, arm, cost, bound) "
        "VALUES ($5, $6, 'charge', $7, $4, $8)"),
    "kgwise_cancel": (
        "text",
        "WITH h AS (DELETE FROM kgwise_holds WHERE decision = $1 RETURNING bound) "
        "UPDATE kgwise_ledger SET reserved = greatest(reserved - coalesce((SELECT sum(bound) FROM h), 0), 0) "
        "WHERE id = 1"),
    "kgwise_take": ("text", "DELETE FROM kgwise_pending WHERE decision = $1 RETURNING body"),
    # settle (the oldest beyond `kept` forgotten), count the arm's coverage, log the learn and observe events
    "kgwise_settle": (  # decision, kept, arm, its six _COUNTS, epoch, replica, x, ops, arms, rewards, costs
        "text, bigint, text, bigint, bigint, bigint, bigint, bigint, bigint, bigint, text, bytea, text[], "
        "text[], float8[], float8[]",
        "WITH s AS (INSERT INTO kgwise_settled (decision) VALUES ($1) ON CONFLICT DO NOTHING RETURNING seq), "
        "t AS (DELETE FROM kgwise_settled WHERE seq <= (SELECT max(seq) FROM s) - $2), "
        f"c AS (INSERT INTO kgwise_coverage (arm, {', '.join(_COUNTS)}) VALUES ($3, $4, $5, $6, $7, $8, $9) "
        "ON CONFLICT (arm) DO UPDATE SET "
        + ", ".join(f"{c} = kgwise_coverage.{c} + EXCLUDED.{c}" for c in _COUNTS) + ") "
        "INSERT INTO kgwise_events (epoch, replica, op, arm, x, reward, cost) "
        "SELECT $10, $11, o, a, $12, r, c FROM unnest($13, $14, $15, $16) AS u(o, a, r, c)"),
}


def _execute(name: str, *args: Any) -> Statement:
    """A :data:`PREPARED` statement's ``EXECUTE`` with ``args`` (quoted into it by the batch)."""
    return (f"EXECUTE {name}({', '.join(['%s'] * len(args))})" if args else f"EXECUTE {name}", args or None)


_ASYNC = "SET LOCAL synchronous_commit = off"
"""For the transactions that only hold or release a bound (routing, a cancel): their commit is visible to
every replica at once, but does not wait for the WAL's flush to disk; the answer's payment, a synchronous
commit on the same connection, flushes the WAL up to itself, so the hold is durable before any answer
is acknowledged. What a PostgreSQL crash can lose is the holds of answers in flight then, which are
released after a restart anyway: a hold belongs to its replica's lease (a session advisory lock), which
the restart ends, and the next routing transaction sweeps the holds of ended leases. Each routing
decision thus waits for no fsync and holds the ledger row that long less: one WAL flush per answer, as
the folder's one journal fsync (docs/scale-out.md, `kgwise bench serve --replicas`)."""


def safe_url(url: str) -> str:
    """``url`` without its password (for messages and ``/health``)."""
    return re.sub(r"(//[^:@/]*):[^@/]*@", r"\1:***@", url)


class SharedCokeRouter(CokeRouter):
    """A Coke router whose budget check also counts the bounds other replicas hold
    (``others_reserved``, read from the ledger), so that Eq. 14's constraint is checked on the whole
    budget."""

    others_reserved: float = 0.0

    @property
    def reserved(self) -> float:
        return float(sum(map(sum, self.holds))) + self.others_reserved


def _vector(blob: bytes | None) -> npt.NDArray[np.float64]:
    return np.frombuffer(blob or b"", dtype="<f8").copy()


def _blob(x: npt.ArrayLike) -> bytes:
    return np.asarray(x, dtype="<f8").tobytes()


def apply_event(router: CokeRouter, op: str, arm: str | None, x: bytes | None, reward: float | None,
                cost: float | None, bound: float | None) -> None:
    """Add one event's delta to ``router`` (module docstring): the same sums the router's own ``pull``,
    ``charge``, ``learn`` and ``observe`` add to, without the holds of the replica that made it."""
    if op == "select":
        router.cost_seen += _vector(x)
        router.questions_seen += 1
        return
    assert arm is not None
    if op == "charge":
        assert cost is not None and bound is not None
        j = router.names.index(arm)
        router.spent += cost
        router.arm_cost[j] += cost
        router.pulls[j] += 1
        router.overrun += max(0.0, cost - bound)
    elif op == "learn":
        assert reward is not None and cost is not None
        router.learn(arm, _vector(x), reward, cost)
    elif op == "observe":
        assert reward is not None
        router.observe(arm, _vector(x), reward)
    else:
        raise DataError(f"unknown state event {op!r} (written by a newer kgwise?)")


def _connect(url: str, timeout_s: float) -> psycopg.Connection[Any]:
    """An autocommit connection whose statements, locks and idle transactions time out."""
    import psycopg

    ms = max(1, int(timeout_s * 1000))
    return psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout_s)),
                           options=f"-c statement_timeout={ms} -c lock_timeout={ms} "
                                   f"-c idle_in_transaction_session_timeout={10 * ms}")


def _unavailable(url: str, exc: BaseException, timeout_s: float) -> StateUnavailableError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StateUnavailableError(f"the state database {safe_url(url)} is down or did not answer within "
                                 f"{timeout_s:g} s ({first}); nothing was acknowledged, try again",
                                 retry_after_s=max(1.0, timeout_s))


def migrate_schema(cur: psycopg.Cursor[Any], url: str, upgrade: bool) -> int:
    """Create the tables in a database without them, check the schema version of one with them, and with
    ``upgrade`` bring an older schema to :data:`SCHEMA_VERSION`; returns the version found. ``DataError``
    naming ``kgwise state migrate`` for a schema of another version."""
    cur.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SPACE,))
    cur.execute("SELECT to_regclass('kgwise_meta') IS NOT NULL")
    row = cur.fetchone()
    exists = row is not None and bool(row[0])
    version = 0
    if exists:
        cur.execute("SELECT value FROM kgwise_meta WHERE key = 'schema_version'")
        found = cur.fetchone()
        version = int(found[0]) if found is not None else 0
    if version > SCHEMA_VERSION:
        raise DataError(f"the state schema is version {version}, newer than this kgwise's {SCHEMA_VERSION}: "
                        "use the kgwise that wrote it (its `kgwise state migrate --from URL --to DIR` moves "
                        "the state to a folder)", safe_url(url))
    if exists and version < SCHEMA_VERSION and not upgrade:
        raise DataError(f"the state schema is version {version}, this kgwise reads {SCHEMA_VERSION}: stop "
                        f"the replicas and run `kgwise state migrate --to {safe_url(url)}` to upgrade it",
                        safe_url(url))
    for step in MIGRATIONS[version:]:
        cur.execute(step)
    if version < SCHEMA_VERSION:
        cur.execute("INSERT INTO kgwise_meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                    "SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
    return version


class _Rows:
    """Read-only views of a table of decisions (``pending`` and ``settled`` of :class:`PgState`)."""

    def __init__(self, state: PgState, table: str) -> None:
        self.state = state
        self.table = table

    def __contains__(self, key: object) -> bool:
        rows = self.state._read(f"SELECT 1 FROM {self.table} WHERE decision = %s", (str(key),))
        return bool(rows)

    def __len__(self) -> int:
        return int(self.state._read(f"SELECT count(*) FROM {self.table}")[0][0])

    def __iter__(self) -> Iterator[str]:
        return iter([str(d) for (d,) in self.state._read(f"SELECT decision FROM {self.table} ORDER BY seq")])


class PendingRows(_Rows):
    """The decisions awaiting feedback (``kgwise_pending``), whichever replica made them."""

    def __init__(self, state: PgState) -> None:
        super().__init__(state, "kgwise_pending")

    def get(self, key: str, /) -> Pending | None:
        rows = self.state._read("SELECT body FROM kgwise_pending WHERE decision = %s", (key,))
        return Pending.from_dict(json.loads(rows[0][0])) if rows else None

    def __getitem__(self, key: str, /) -> Pending:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def values(self) -> list[Pending]:
        rows = self.state._read("SELECT body FROM kgwise_pending ORDER BY seq")
        return [Pending.from_dict(json.loads(body)) for (body,) in rows]

    def newest(self, n: int) -> list[Pending]:
        """The newest ``n``, oldest first: what a status shows, without reading (and decoding the
        embeddings of) every pending decision — the server samples its status twice a second."""
        rows = self.state._read("SELECT body FROM (SELECT body, seq FROM kgwise_pending ORDER BY seq DESC "
                                "LIMIT %s) AS t ORDER BY seq", (max(n, 0),))
        return [Pending.from_dict(json.loads(body)) for (body,) in rows]

    def clear(self) -> None:
        """Drop every decision awaiting feedback (``fit`` replacing the router does)."""
        with self.state._tx() as cur:
            cur.execute("DELETE FROM kgwise_pending")


class PgState(StateFiles):
    """An open PostgreSQL state (module docstring; a context manager). ``root``: the local folder of the
    state's files (fit's log and report; copies of the calibrations); ``dim``: the question encoder's
    dimension."""

    def __init__(self, url: str, root: Path, config: PipelineConfig, dim: int, timeout_s: float = 2.0,
                 upgrade: bool = False) -> None:
        self.url = url
        self.root = root
        self._config = config
        self.timeout_s = timeout_s
        self.replica = f"{short_hash((time.time_ns(), random.random()))}"
        self.encoder_dim = dim
        self._lock = threading.RLock()
        self._router: RouterAdapter
        self.context: Context
        self._conn: psycopg.Connection[Any] | None = None
        self._prepared: psycopg.Connection[Any] | None = None  # the connection holding PREPARED
        self._lease_conn: psycopg.Connection[Any] | None = None
        self.lease = 0
        self.epoch = 0
        self.watermark = 0
        self._base_upto = 0
        self._expired = 0
        self._selected: dict[str, tuple[str, float]] = {}
        self._deferred: list[tuple[str, str, float, float]] = []  # ("pay"|"cancel", decision, cost, bound)
        self._caught_up = 0.0
        self._swept = 0.0
        self._replaced = False
        self._coverage: dict[str, CoverageCount] = {a.name: CoverageCount() for a in config.arms}
        self._calibration: tuple[HeldOutCalibration | None, str | None] = (None, None)
        self._staged: tuple[HeldOutCalibration | None, str | None] | None = None
        self.pending = PendingRows(self)
        self.settled = _Rows(self, "kgwise_settled")
        root.mkdir(parents=True, exist_ok=True)
        try:
            with self._tx() as cur:
                migrate_schema(cur, url, upgrade)
                fresh = RouterAdapter.new(config, context_width(config, config.router.context, dim))
                base = json.dumps({"router": fresh.state_dict(), "context": config.router.context})
                cur.execute("INSERT INTO kgwise_ledger VALUES (1, 1, %s, %s, 0, 0, 0) "
                            "ON CONFLICT (id) DO NOTHING", (base, fresh.budget))
                self._load_epoch(cur)
            self.check_matches(dim)
            self._lease()
            with self._tx() as cur:
                self._catch_up(cur, lock=True)
                self._sweep(cur)
        except BaseException:
            self._drop()
            raise

    # ------------------------------------------------------------------ connections
    @contextmanager
    def _tx(self) -> Iterator[psycopg.Cursor[Any]]:
        """A transaction on the work connection (reconnected when lost), a round trip per statement;
        database faults become :class:`StateUnavailableError`."""
        import psycopg

        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    yield cur
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise _unavailable(self.url, exc, self.timeout_s) from exc

    def _connection(self) -> psycopg.Connection[Any]:
        """The work connection (autocommit: transactions are opened by :meth:`_tx` or by ``BEGIN`` sent
        in a :meth:`_batch`), reconnected when lost."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = _connect(self.url, self.timeout_s)
        return self._conn

    @contextmanager
    def _batched(self) -> Iterator[psycopg.ClientCursor[Any]]:
        """A cursor for :meth:`_batch`es on the work connection: the caller's first batch starts with
        ``BEGIN`` and its last ends with ``COMMIT``; whatever leaves a transaction open (an error in a
        statement or between batches) is rolled back. Database faults become
        :class:`StateUnavailableError`."""
        import psycopg

        with self._lock:
            try:
                conn = self._connection()
                try:
                    with psycopg.ClientCursor(conn) as cur:
                        if self._prepared is not conn:
                            self._prepare(cur)
                        yield cur
                finally:
                    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                        conn.execute("ROLLBACK")
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise _unavailable(self.url, exc, self.timeout_s) from exc

    @staticmethod
    def _batch(cur: psycopg.ClientCursor[Any], statements: Sequence[Statement]
               ) -> list[list[tuple[Any, ...]]]:
        """Run ``statements`` in one round trip: one message of the simple query protocol, parameters
        bound by psycopg's client-side quoting; the per-answer statements are ``PREPARED`` on the
        connection and sent as ``EXECUTE``. PostgreSQL runs them in order,
        each with a snapshot of its own (READ COMMITTED), and stops at the first that fails. The rows of
        each (empty for a statement without a result)."""
        from psycopg.pq import ExecStatus

        cur.execute("; ".join(cur.mogrify(sql, args) for sql, args in statements))
        out: list[list[tuple[Any, ...]]] = []
        while True:  # the result's status, not `description` (which builds a Column per field each time)
            result = cur.pgresult
            out.append(cur.fetchall() if result is not None and result.status == ExecStatus.TUPLES_OK else [])
            if not cur.nextset():
                return out

    def _prepare(self, cur: psycopg.ClientCursor[Any]) -> None:
        """On a new work connection, in one round trip: PREPARE the :data:`PREPARED` statements, and
        compress large values (a decision's body, a feedback's context) with LZ4 where the server has it
        (PostgreSQL ≥ 14 built with it: Debian's is), not with the default pglz, which took 4 % of its CPU
        per answer."""
        prepare = [f"PREPARE {name}{f' ({types})' if types else ''} AS {sql}"
                   for name, (types, sql) in PREPARED.items()]
        self._batch(cur, [("DEALLOCATE ALL", None), *((sql, None) for sql in prepare),
                          ("SELECT set_config('default_toast_compression', 'lz4', false) FROM pg_settings "
                           "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)", None)])
        self._prepared = cur.connection

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._tx() as cur:
            cur.execute(sql.encode(), args)
            return cur.fetchall()

    def _drop(self) -> None:
        """Close the connections after a fault; the next operation reconnects and takes a new lease."""
        for conn in (self._conn, self._lease_conn):
            if conn is not None:
                with suppress(Exception):  # closing a broken connection may fail again: gone either way
                    conn.close()
        self._conn = self._lease_conn = self._prepared = None

    def _lease(self) -> None:
        """Hold a session advisory lock naming this replica: the holds it makes are released by the others
        once its connection is gone (a kill, a crash)."""
        import psycopg

        try:
            self._lease_conn = _connect(self.url, self.timeout_s)
            for _ in range(100):  # a random 31-bit key is taken by another replica about never
                lease = random.randrange(1, 2**31)
                row = self._lease_conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                               (LOCK_SPACE, lease)).fetchone()
                if row is not None and row[0]:
                    self.lease = lease
                    return
            raise DataError("no free lease key in 100 draws", safe_url(self.url))
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._drop()
            raise _unavailable(self.url, exc, self.timeout_s) from exc

    def _ensure_lease(self) -> None:
        if self._lease_conn is None or self._lease_conn.closed:
            self._lease()

    # ------------------------------------------------------------------ reading the shared router
    def _load_epoch(self, cur: psycopg.Cursor[Any]) -> None:
        """The router of the current epoch: its base and every event after it."""
        cur.execute("SELECT epoch, base, expired, base_upto FROM kgwise_ledger WHERE id = 1")
        row = cur.fetchone()
        assert row is not None
        epoch, base, self._expired, upto = int(row[0]), json.loads(row[1]), int(row[2]), int(row[3])
        try:
            context = base.get("context", "question")
            if context not in CONTEXTS:
                raise ValueError(f"context {context!r} is not one of {', '.join(CONTEXTS)}")
            router = SharedCokeRouter.from_state_dict(base["router"])
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"the ledger's base router does not load ({exc})", safe_url(self.url)) from exc
        self.context = context
        self._router = RouterAdapter(router)
        self.epoch, self.watermark, self._base_upto = epoch, upto, upto
        cur.execute(_EVENTS, (self.epoch, self.watermark))
        self._apply_rows(cur.fetchall(), mine_too=True)
        self._read_coverage(cur)
        self._download(cur)  # the calibration (and files) of this epoch's fit

    def _load_calibration(self) -> None:
        """Read the epoch's calibration; it replaces the one in use at the next :attr:`calibration` read
        made while no answer is between its routing and its record (module docstring)."""
        found: tuple[HeldOutCalibration | None, str | None] = (None, None)
        if self.calibration_file.exists():
            try:
                found = (HeldOutCalibration.load(self.calibration_file), None)
            except DataError as exc:  # answers say so; a fit (which this must not block) replaces it
                found = (None, str(exc))
        self._staged = found

    def _swap_calibration(self) -> None:
        with self._lock:
            if self._staged is not None and not self._selected:
                self._calibration, self._staged = self._staged, None

    @property
    def calibration(self) -> HeldOutCalibration | None:
        """The held-out calibration; one a new epoch brought is taken up only while no answer of this
        replica is between its routing and its record, so an answer's set is made with the calibration its
        calibration group was computed from."""
        self._swap_calibration()
        return self._calibration[0]

    @property
    def calibration_problem(self) -> str | None:
        self._swap_calibration()
        return self._calibration[1]

    @calibration_problem.setter
    def calibration_problem(self, why: str | None) -> None:
        """Why the calibration present is not used (a stale one: answers and status say so)."""
        self._swap_calibration()
        self._calibration = (self._calibration[0], why)

    def _apply_rows(self, rows: list[tuple[Any, ...]], mine_too: bool = False) -> bool:
        """Add these rows of :data:`_EVENTS` (the events after the watermark: another replica's; with
        ``mine_too`` this one's as well) to the local router; whether any was a feedback."""
        learnt = False
        router = self._router.router
        for id_, replica, op, arm, x, reward, cost, bound in rows:
            if mine_too or replica != self.replica:
                apply_event(router, op, arm, x, reward, cost, bound)
                learnt = learnt or op == "learn"
            self.watermark = int(id_)
        return learnt

    def _read_coverage(self, cur: psycopg.Cursor[Any]) -> None:
        cur.execute(f"SELECT arm, {', '.join(_COUNTS)} FROM kgwise_coverage")
        coverage = {a.name: CoverageCount() for a in self._config.arms}
        for arm, *counts in cur.fetchall():
            coverage[str(arm)] = CoverageCount(*(int(c) for c in counts))
        self._coverage = coverage

    def _catch_up(self, cur: psycopg.Cursor[Any], lock: bool) -> None:
        """Bring the local router to every event committed so far (``lock``: and hold the ledger row until
        the transaction ends, as every writer does before it draws an event id)."""
        cur.execute(_LEDGER + (" FOR UPDATE" if lock else ""))
        row = cur.fetchone()
        assert row is not None
        cur.execute(_EVENTS, (self.epoch, self.watermark))
        self._caught_up_to(cur, row, cur.fetchall())

    def _caught_up_to(self, cur: psycopg.Cursor[Any], row: tuple[Any, ...], events: list[tuple[Any, ...]]
                      ) -> None:
        """:meth:`_catch_up`'s work once the ledger ``row`` and the ``events`` after the watermark are read
        (in that order: the events read after the ledger's lock was granted)."""
        if int(row[0]) != self.epoch or int(row[3]) > self.watermark:
            self._load_epoch(cur)  # a fit or a migration replaced the router, or a checkpoint passed us
        else:
            # another replica's checkpoint below the watermark: the events it dropped were applied here;
            # without taking up its mark, this replica would count them again and checkpoint at every
            # decision (each writing the whole router)
            self._base_upto = int(row[3])
            if self._apply_rows(events):
                self._read_coverage(cur)
        router = self._router.router
        assert isinstance(router, SharedCokeRouter)
        own = float(sum(map(sum, router.holds)))
        router.others_reserved = max(0.0, float(row[1]) - own)
        self._expired = int(row[2])
        self._caught_up = time.monotonic()

    def _checkpoint(self, cur: psycopg.Cursor[Any]) -> None:
        """Under the ledger lock, caught up: once :data:`CHECKPOINT_EVENTS` events follow the base, make
        this router (base + every event, without this replica's holds) the base and drop those events, so
        that opening replays at most that many (a replica behind it reloads from the new base)."""
        if self.watermark - self._base_upto < CHECKPOINT_EVENTS:
            return
        state = self._router.state_dict()
        state["holds"] = [[] for _ in state["holds"]]
        with cur.connection.cursor() as bound:  # the base (megabytes) as a bound parameter, not quoted
            bound.execute("UPDATE kgwise_ledger SET base = %s, base_upto = %s WHERE id = 1",
                          (json.dumps({"router": state, "context": self.context}), self.watermark))
        cur.execute("DELETE FROM kgwise_events WHERE epoch = %s AND id <= %s", (self.epoch, self.watermark))
        self._base_upto = self.watermark

    def _sweep(self, cur: psycopg.Cursor[Any]) -> None:
        """Under the ledger lock: release the holds of replicas whose lease is gone (killed mid-answer)."""
        cur.execute("SELECT DISTINCT lease FROM kgwise_holds WHERE lease <> %s", (self.lease,))
        for (lease,) in cur.fetchall():
            cur.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", (LOCK_SPACE, lease))
            row = cur.fetchone()
            if row is not None and row[0]:  # nobody holds the lease: its replica is gone
                cur.execute("DELETE FROM kgwise_holds WHERE lease = %s RETURNING bound", (lease,))
                freed = sum(float(b) for (b,) in cur.fetchall())
                cur.execute("UPDATE kgwise_ledger SET reserved = greatest(reserved - %s, 0) WHERE id = 1",
                            (freed,))
                router = self._router.router
                assert isinstance(router, SharedCokeRouter)
                router.others_reserved = max(0.0, router.others_reserved - freed)
        self._swept = time.monotonic()

    def refresh(self) -> None:
        """Catch up with the other replicas now."""
        with self._tx() as cur:
            self._catch_up(cur, lock=False)

    # ------------------------------------------------------------------ the protocol
    @property
    def config(self) -> PipelineConfig:
        return self._config

    @property
    def router(self) -> RouterAdapter:
        return self._router

    @router.setter
    def router(self, value: RouterAdapter) -> None:
        """A new router (``fit``): the next :meth:`save` makes it the base of a new epoch."""
        self._router = RouterAdapter(SharedCokeRouter.from_state_dict(value.state_dict()))
        self._replaced = True

    @property
    def expired(self) -> int:
        return self._expired

    @property
    def coverage(self) -> dict[str, CoverageCount]:
        """Live coverage counts of every replica's feedback, at most :data:`REFRESH_S` old."""
        if time.monotonic() - self._caught_up >= REFRESH_S:
            self.refresh()
        return self._coverage

    def select(self, decision: str, x: list[float], costs: dict[str, float]) -> str | None:
        """Route a question inside a transaction holding the ledger row (module docstring) and reserve
        its arm's bound in the database; the local router is left as it was when the database fails."""
        with self._lock:
            self._flush()
            self._ensure_lease()
            arm: str | None = None
            restore: tuple[int, npt.NDArray[np.float64]] | None = None
            try:
                # two round trips: begin, lock the ledger and read the events after it; reserve and commit
                # without waiting for the WAL's flush (_ASYNC)
                with self._batched() as cur:
                    _, _, ledger, events = self._batch(cur, [
                        ("BEGIN", None), (_ASYNC, None), _execute("kgwise_ledger_lock"),
                        _execute("kgwise_events_after", self.epoch, self.watermark)])
                    self._caught_up_to(cur, ledger[0], events)
                    if time.monotonic() - self._swept >= REFRESH_S:
                        self._sweep(cur)
                    self._checkpoint(cur)
                    r = self._router.router
                    seen = r.cost_seen.copy()
                    restore = (r.questions_seen, seen)
                    arm = self._router.select(np.asarray(x, dtype=np.float64), costs)
                    bound = 0.0 if arm is None else float(costs[arm])
                    # reserve (the database's own check: never above the budget), hold, log: one statement
                    rows = self._batch(cur, [
                        _execute("kgwise_reserve", bound, arm, decision, self.lease, self.epoch, self.replica,
                                 _blob(r.cost_seen - seen)), ("COMMIT", None)])[0]
                    if arm is not None and (not rows or rows[0][0] is None):
                        self._router.cancel(arm, bound)
                        arm = None
            except StateUnavailableError:
                if restore is not None:
                    r = self._router.router
                    if arm is not None:
                        self._router.cancel(arm, float(costs[arm]))
                    r.questions_seen, r.cost_seen = restore
                raise
            if arm is not None:
                self._selected[decision] = (arm, float(costs[arm]))
            return arm

    def record(self, pending: Pending) -> None:
        """Pay a selected decision's answer (its hold released) and keep it awaiting feedback, in one
        transaction; when the database fails the payment is kept and written before the next operation
        (the arm was called: the money is gone), and the answer is not acknowledged."""
        with self._lock:
            if pending.decision not in self._selected:
                raise DataError(f"decision {pending.decision} was not selected", safe_url(self.url))
            try:  # a fault while writing what an earlier one held back holds this payment back too
                self._flush()
                self._pay(pending.decision, pending.arm, pending.cost, pending.bound, pending)
            except StateUnavailableError:
                self._deferred.append(("pay", pending.decision, pending.cost, pending.bound))
                raise

    def cancel(self, decision: str, charged: float = 0.0) -> None:
        """Call off a selected decision whose arm did not answer: its bound returns to the budget; an arm
        that was called but whose usage could not be priced is paid ``charged`` (its bound) instead."""
        if charged > 0:
            arm, bound = self._selected[decision]
            with self._lock:
                try:
                    self._flush()
                    self._pay(decision, arm, charged, bound, None)
                except StateUnavailableError:
                    self._deferred.append(("pay", decision, charged, bound))
                    raise
            return
        with self._lock:
            try:
                self._flush()
                self._cancel(decision)
            except StateUnavailableError:
                self._deferred.append(("cancel", decision, 0.0, 0.0))
                raise

    # the folder state's fault handling has no counterpart here: a database that cannot be written raises
    # StateUnavailableError at the write itself (503 + Retry-After at the server)
    read_only: str | None = None

    @property
    def warnings(self) -> list[str]:
        return []

    @property
    def routed(self) -> Mapping[str, Routed]:
        """External arms keep their decisions in the state folder only: none wait here."""
        return {}

    def check_writable(self) -> None:
        """Nothing to check ahead: each write reports its own fault."""

    def replace_router(self, router: RouterAdapter, context: Context) -> None:
        """A fit's new router and context: it starts from the spend, overrun and per-arm spend of the one
        it replaces (spend only grows); the next :meth:`save` makes it the base of a new epoch."""
        router.carry_spend(self.router)
        self.router = router
        self.context = context
        self.pending.clear()

    def _flush(self) -> None:
        """Write the pays and cancels a database fault held back, oldest first."""
        while self._deferred:
            op, decision, cost, bound = self._deferred[0]
            if op == "pay":
                self._pay(decision, self._selected[decision][0], cost, bound, None)
            else:
                self._cancel(decision)
            self._deferred.pop(0)

    def _pay(self, decision: str, arm: str, cost: float, bound: float, pending: Pending | None) -> None:
        """Release the hold (gone already: a new epoch, or a sweep took it for a dead replica's), pay,
        log the charge, keep the decision awaiting feedback (the oldest beyond PENDING_KEPT expire): one
        round trip."""
        with self._batched() as cur:
            self._batch(cur, [("BEGIN", None), _execute("kgwise_lock"), _execute(
                "kgwise_pay", decision, None if pending is None else pending.to_json(), PENDING_KEPT, cost,
                self.epoch, self.replica, arm, bound), ("COMMIT", None)])
        self._selected.pop(decision, None)
        router = self._router.router
        if bound in router.holds[router.names.index(arm)]:
            self._router.charge(arm, cost, bound)
        else:  # the hold went with a new epoch: pay without it
            apply_event(router, "charge", arm, None, None, cost, bound)

    def _cancel(self, decision: str) -> None:
        arm, bound = self._selected[decision]
        with self._batched() as cur:  # one round trip, not waiting for the WAL's flush (_ASYNC)
            self._batch(cur, [("BEGIN", None), (_ASYNC, None), _execute("kgwise_lock"),
                              _execute("kgwise_cancel", decision), ("COMMIT", None)])
        self._selected.pop(decision, None)
        router = self._router.router
        if bound in router.holds[router.names.index(arm)]:
            self._router.cancel(arm, bound)

    def feedback(self, decision: str, reward: float, observed: dict[str, float], covered: bool | None
                 ) -> None:
        """Settle a pending decision made by any replica, once: the router learns (Eq. 5, 11, 14) and the
        arm's live coverage is counted, in one transaction that takes the decision's row."""
        with self._lock:
            self._flush()
            # two round trips: begin, lock, new events, take the decision; learn and commit
            with self._batched() as cur:
                _, ledger, events, taken = self._batch(cur, [
                    ("BEGIN", None), _execute("kgwise_ledger_lock"),
                    _execute("kgwise_events_after", self.epoch, self.watermark),
                    _execute("kgwise_take", decision)])
                self._caught_up_to(cur, ledger[0], events)
                if not taken:
                    raise ConfigError(f"decision {decision!r} was settled meanwhile (by another replica)")
                p = Pending.from_dict(json.loads(taken[0][0]))
                delta = coverage_delta(p, reward, covered)
                names = [p.arm, *observed]
                # settle (the oldest beyond SETTLED_KEPT forgotten), count coverage, log: one statement
                self._batch(cur, [_execute(
                    "kgwise_settle", decision, SETTLED_KEPT, p.arm, *(getattr(delta, c) for c in _COUNTS),
                    self.epoch, self.replica, _blob(p.embedding), ["learn"] + ["observe"] * len(observed),
                    names, [reward, *observed.values()], [p.cost] + [None] * len(observed)),
                    ("COMMIT", None)])
            v = np.asarray(p.embedding, dtype=np.float64)
            self._router.learn(p.arm, v, reward, p.cost)
            for name, r in observed.items():
                self._router.observe(name, v, r)
            self._coverage.setdefault(p.arm, CoverageCount()).add(delta)

    def sync(self) -> None:
        """Nothing to do: each answer and feedback committed before it returned."""

    def check_matches(self, dim: int) -> None:
        """``DataError`` when the database's router does not fit the config (other arms, budget, width)."""
        r = self._router
        problems = router_mismatch(r, self.context, self._config, dim)
        if r.budget != self._config.router.budget:
            problems.append(f"its budget is {r.budget:g}, the config's {self._config.router.budget:g}")
        if problems:
            raise DataError(f"made for another config ({'; '.join(problems)}): use another database, or run "
                            "`kgwise fit` again", safe_url(self.url))

    # ------------------------------------------------------------------ snapshots and files
    def save(self) -> None:
        """After ``fit`` replaced the router: make it the base of a new epoch (events, holds and pending
        decisions of the old one are dropped, as a fit drops them in the folder) and store the UAG
        calibration it wrote; before that, the pays and cancels a database fault held back (every other
        change is committed)."""
        with self._lock:
            self._flush()
            if not self._replaced:
                return
            router = self._router
            base = json.dumps({"router": router.state_dict(), "context": self.context})
            with self._tx() as cur:
                cur.execute("SELECT epoch FROM kgwise_ledger WHERE id = 1 FOR UPDATE")
                row = cur.fetchone()
                assert row is not None
                cur.execute("UPDATE kgwise_ledger SET epoch = %s, base = %s, budget = %s, spent = %s, "
                            "reserved = 0, base_upto = 0 WHERE id = 1",
                            (int(row[0]) + 1, base, router.budget, router.spent))
                cur.execute("DELETE FROM kgwise_events")
                cur.execute("DELETE FROM kgwise_holds")
                cur.execute("DELETE FROM kgwise_pending")
                self._upload(cur, UAG_FILE)
                self._load_epoch(cur)
            self._replaced = False

    def _upload(self, cur: psycopg.Cursor[Any], name: str) -> None:
        """Store the local file ``name`` (or remove the stored one when the file is gone)."""
        path = self.root / name
        if path.is_file():
            cur.execute("INSERT INTO kgwise_files VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET body = "
                        "EXCLUDED.body", (name, path.read_bytes()))
        else:
            cur.execute("DELETE FROM kgwise_files WHERE name = %s", (name,))

    def _download(self, cur: psycopg.Cursor[Any]) -> None:
        """Copy the stored files into the local folder (replacing what is there)."""
        cur.execute("SELECT name, body FROM kgwise_files")
        for name, body in cur.fetchall():
            target = (self.root / name).resolve()
            if self.root.resolve() not in target.parents:
                raise DataError(f"stored file name {name!r} leaves the state folder", safe_url(self.url))
            with atomic_path(target) as tmp:
                tmp.write_bytes(bytes(body))
        self._load_calibration()

    def save_prompt_bandit(self, arm: str, bandit: PromptBandit | None) -> None:
        """Write (``None``: remove) ``arm``'s learnt prompt bandit, locally and in the database."""
        path = self.prompt_bandit_file(arm)
        write_prompt_bandit(path, bandit)
        with self._tx() as cur:
            self._upload(cur, str(path.relative_to(self.root)))

    def save_calibration(self, calibration: HeldOutCalibration) -> None:
        """Replace the calibration (and reset the live coverage counts, which were for the old one)."""
        calibration.save(self.calibration_file)
        with self._tx() as cur:
            self._upload(cur, CALIBRATION_FILE)
            cur.execute("DELETE FROM kgwise_coverage")
        self._calibration, self._staged = (calibration, None), None
        self._coverage = {a.name: CoverageCount() for a in self._config.arms}

    # ------------------------------------------------------------------ health and lifecycle
    def health(self) -> dict[str, Any]:
        """The database, its schema version, epoch, budget and a query's round trip (``ok`` false with the
        error when it does not answer in time)."""
        out: dict[str, Any] = {"backend": "postgresql", "url": safe_url(self.url), "replica": self.replica}
        t = time.perf_counter()
        try:
            rows = self._read("SELECT (SELECT value FROM kgwise_meta WHERE key = 'schema_version'), epoch, "
                              "spent, reserved, budget FROM kgwise_ledger WHERE id = 1")
        except StateUnavailableError as exc:
            return {**out, "ok": False, "error": str(exc)}
        version, epoch, spent, reserved, budget = rows[0]
        return {**out, "ok": True, "schema_version": int(version), "epoch": int(epoch), "spent": float(spent),
                "reserved": float(reserved), "budget": float(budget),
                "latency_ms": round(1000 * (time.perf_counter() - t), 3)}

    def close(self) -> None:
        """Write a replaced router (:meth:`save`) and close the connections (the lease ends with them)."""
        try:
            self.save()
        finally:
            with self._lock:
                self._drop()

    def __enter__(self) -> PgState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
