"""A throw-away Virtuoso (Debian's ``virtuoso-opensource``) on 127.0.0.1 for tests and benchmarks.

:class:`Virtuoso` writes a ``virtuoso.ini`` into a fresh database directory (free ports for SQL and
HTTP, the directory itself as the only one the bulk loader may read, result and sort limits raised so
paged label queries work), starts ``virtuoso-t`` in the foreground, and bulk-loads N-Triples files the
documented way: ``ld_dir`` + ``rdf_loader_run`` + ``checkpoint`` through ``isql-vt``. The SPARQL endpoint
is ``http://127.0.0.1:PORT/sparql``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from kgwise.errors import ConfigError, ServiceError
from kgwise.eval.bench.net import ServerProcess, free_port, sparql_answers

__all__ = ["GRAPH_IRI", "Virtuoso", "virtuoso_binaries"]

GRAPH_IRI = "urn:kgwise:graph"
"""The named graph files are loaded into (Virtuoso's endpoint queries the union of its graphs)."""


def virtuoso_binaries() -> tuple[str, str] | None:
    """``(virtuoso-t, isql-vt)`` paths, or ``None`` when Virtuoso is not installed."""
    server, isql = shutil.which("virtuoso-t"), shutil.which("isql-vt") or shutil.which("isql")
    return (server, isql) if server and isql else None



_INI = """[Database]
DatabaseFile = {db}/virtuoso.db
ErrorLogFile = {db}/virtuoso.log
LockFile = {db}/virtuoso.lck
TransactionFile = {db}/virtuoso.trx
xa_persistent_file = {db}/virtuoso.pxa
[TempDatabase]
DatabaseFile = {db}/virtuoso-temp.db
TransactionFile = {db}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{sql}
DisableUnixSocket = 1
DirsAllowed = ., {db}
NumberOfBuffers = {buffers}
MaxDirtyBuffers = {dirty}
MaxQueryMem = 1G
ThreadsPerQuery = 2
MaxSortedTopRows = 100000000
CheckpointInterval = 0
[HTTPServer]
ServerPort = 127.0.0.1:{http}
ServerRoot = {db}
MaxClientConnections = 8
ServerThreads = 8
[SPARQL]
ResultSetMaxRows = 100000000
MaxQueryExecutionTime = 600
MaxQueryCostEstimationTime = 0
DefaultGraph = {graph}
"""


class Virtuoso(ServerProcess):
    """One Virtuoso server over ``db_dir`` (created when missing; a database loaded there before is served
    again, the ini rewritten with free ports); ``memory_mb`` sizes its page buffers. Use as a context
    manager, or :meth:`start` / :meth:`stop`."""

    def __init__(self, db_dir: str | Path, memory_mb: int = 1024) -> None:
        found = virtuoso_binaries()
        if found is None:
            raise ConfigError("Virtuoso is not installed (apt-get install virtuoso-opensource)")
        self.server, self.isql = found
        self.db = Path(db_dir).resolve()
        self.db.mkdir(parents=True, exist_ok=True)
        self.sql_port, self.http_port = free_port(), free_port()
        buffers = max(memory_mb * 1024 // 8 * 2 // 3, 2000)  # 8 KB pages, ~2/3 of the memory
        (self.db / "virtuoso.ini").write_text(_INI.format(
            db=self.db, sql=self.sql_port, http=self.http_port, buffers=buffers, dirty=buffers * 3 // 4,
            graph=GRAPH_IRI), encoding="utf-8")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/sparql"

    def start(self, timeout_s: float = 60.0) -> Virtuoso:
        """Start the server and wait until its endpoint answers; ``ServiceError`` with the log's tail if it
        does not within ``timeout_s``."""
        self.proc = subprocess.Popen([self.server, "+foreground", "+configfile", "virtuoso.ini"], cwd=self.db,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self.await_ready(lambda: sparql_answers(self.endpoint), timeout_s,
                                f"Virtuoso on {self.endpoint}", self._log_tail)

    def _log_tail(self) -> str:
        log = self.db / "virtuoso.log"
        return log.read_text(encoding="utf-8", errors="replace")[-800:] if log.is_file() else "(no log)"

    def sql(self, script: str, timeout_s: float = 3600.0) -> str:
        """Run ``script`` through ``isql-vt`` (user dba, the fresh database's password); its output, or
        ``ServiceError`` naming the failing statement's error."""
        proc = subprocess.run([self.isql, str(self.sql_port), "dba", "dba"], input=script.encode(),
                              capture_output=True, timeout=timeout_s, check=False)
        out = proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")
        if proc.returncode != 0 or "*** Error" in out:
            raise ServiceError(f"isql failed (exit {proc.returncode}): {out[-800:]}")
        return out

    def bulk_load(self, files: list[Path]) -> float:
        """Load N-Triples files with Virtuoso's bulk loader (copied into the database directory, which is
        the only one it may read); seconds taken."""
        t0 = time.perf_counter()
        stage = self.db / "load"
        stage.mkdir(exist_ok=True)
        for f in files:
            shutil.copyfile(f, stage / f.name)
        self.sql(f"ld_dir('{stage}', '*.nt*', '{GRAPH_IRI}');\nrdf_loader_run();\ncheckpoint;\n"
                 "SELECT ll_file, ll_error FROM DB.DBA.load_list WHERE ll_error IS NOT NULL;\n")
        errors = self.sql("SELECT COUNT(*) FROM DB.DBA.load_list WHERE ll_error IS NOT NULL;\n")
        if "\n0\n" not in errors.replace(" ", ""):
            raise ServiceError(f"Virtuoso's bulk loader reported errors: {errors[-800:]}")
        shutil.rmtree(stage)
        return time.perf_counter() - t0
