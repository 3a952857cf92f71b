"""A throw-away PostgreSQL (Debian's ``postgresql``) on 127.0.0.1 for tests and benchmarks.

:class:`LocalPostgres` runs ``initdb`` into a fresh temporary directory (trust authentication for the
role ``kgwise``, loopback only: no other machine can reach it) and starts ``postgres`` in the foreground
on a free port, with its socket in that directory. PostgreSQL refuses to run as root: as root both run
as the ``postgres`` user (created by the Debian package), which owns the directory. :meth:`create_database`
makes a fresh database and returns its URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError, ServiceError
from kgwise.eval.bench.net import ServerProcess, free_port

__all__ = ["LocalPostgres", "postgres_binaries"]


def postgres_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``initdb`` and ``postgres``, or ``None``."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/postgres")
             if p.with_name("initdb").exists()]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0) if found else None


class LocalPostgres(ServerProcess):
    """One PostgreSQL server over a fresh data directory (removed by :meth:`stop` unless ``keep``); use as a
    context manager, or :meth:`start` / :meth:`stop`. :meth:`halt` and :meth:`start` again stop and restart
    it on the same port and data (a database outage)."""

    def __init__(self, keep: bool = False) -> None:
        bindir = postgres_binaries()
        if bindir is None:
            raise ConfigError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = bindir
        self.keep = keep
        self.port = free_port()
        self.user: str | None = "postgres" if os.geteuid() == 0 else None
        self.dir = Path(tempfile.mkdtemp(prefix="kgwise-pg-"))
        self.data = self.dir / "data"
        if self.user is not None:
            shutil.chown(self.dir, self.user)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "kgwise", "--auth=trust",
                   "-E", "UTF8", "--no-instructions"])
        self.proc: subprocess.Popen[bytes] | None = None

    def _run(self, argv: list[str]) -> None:
        proc = subprocess.run(argv, capture_output=True, timeout=120, check=False, **self._as_owner())
        if proc.returncode != 0:
            raise ServiceError(f"{Path(argv[0]).name} failed (exit {proc.returncode}): "
                               f"{proc.stderr.decode(errors='replace')[-800:]}")

    def _as_owner(self) -> dict[str, Any]:
        return {} if self.user is None else {"user": self.user, "group": self.user}

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://kgwise@127.0.0.1:{self.port}/{database}"

    def start(self, timeout_s: float = 60.0) -> LocalPostgres:
        """Start the server and wait until it accepts connections; ``ServiceError`` with its log's tail
        when it does not within ``timeout_s``."""
        import psycopg

        log = self.dir / "server.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                 "-c", "max_connections=200"],
                stdout=out, stderr=subprocess.STDOUT, **self._as_owner())

        def accepts() -> bool:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return True
            except psycopg.OperationalError:
                return False

        return self.await_ready(accepts, timeout_s, f"PostgreSQL on port {self.port}", self._log_tail)

    def _log_tail(self) -> str:
        log = self.dir / "server.log"
        return log.read_text(encoding="utf-8", errors="replace")[-800:] if log.is_file() else "(no log)"

    def create_database(self, name: str) -> str:
        """A fresh, empty database ``name`` (dropped first if it exists); its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def halt(self) -> None:
        """Stop the server at once (fast shutdown: clients are disconnected), keeping its data."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        """Stop the server and remove its data directory (unless ``keep``)."""
        self.halt()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
