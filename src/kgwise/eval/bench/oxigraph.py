"""A throw-away Oxigraph server (the ``oxigraph`` binary of the dev extras) on 127.0.0.1 for benchmarks.

:class:`Oxigraph` bulk-loads N-Triples files into a fresh database directory (``oxigraph load``), then
serves it read-only (``oxigraph serve-read-only``); the SPARQL endpoint is ``http://127.0.0.1:PORT/query``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from kgwise.errors import ConfigError, ServiceError
from kgwise.eval.bench.net import ServerProcess, free_port, sparql_answers

__all__ = ["Oxigraph", "oxigraph_binary"]


def oxigraph_binary() -> str | None:
    """The ``oxigraph`` binary beside this Python (the dev extras install it), else on ``PATH``."""
    beside = Path(sys.executable).with_name("oxigraph")
    return str(beside) if beside.is_file() else shutil.which("oxigraph")


class Oxigraph(ServerProcess):
    """One Oxigraph store over ``db_dir``: :meth:`load` files, then use as a context manager (or
    :meth:`start` / :meth:`stop`) to serve it."""

    def __init__(self, db_dir: str | Path) -> None:
        binary = oxigraph_binary()
        if binary is None:
            raise ConfigError("oxigraph is not installed (pip install the dev extras)")
        self.binary = binary
        self.db = Path(db_dir).resolve()
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/query"

    def load(self, files: list[Path], timeout_s: float = 3600.0) -> float:
        """Bulk-load N-Triples ``files`` into the store (before :meth:`start`); seconds taken."""
        t0 = time.perf_counter()
        for f in files:
            proc = subprocess.run([self.binary, "load", "--location", str(self.db), "--file", str(f)],
                                  capture_output=True, timeout=timeout_s, check=False)
            if proc.returncode != 0:
                raise ServiceError(f"oxigraph load {f} failed (exit {proc.returncode}): "
                                   f"{proc.stderr.decode(errors='replace')[-800:]}")
        return time.perf_counter() - t0

    def start(self, timeout_s: float = 60.0) -> Oxigraph:
        """Serve the store read-only and wait until the endpoint answers (``ServiceError`` otherwise)."""
        self.proc = subprocess.Popen([self.binary, "serve-read-only", "--location", str(self.db), "--bind",
                                      f"127.0.0.1:{self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        return self.await_ready(lambda: sparql_answers(self.endpoint), timeout_s,
                                f"oxigraph on {self.endpoint}", self._err_tail)

    def _err_tail(self) -> str:
        """The end of what the server wrote to stderr (once it has ended; empty while it runs)."""
        proc = self.proc
        if proc is None or proc.stderr is None or proc.poll() is None:
            return ""
        return proc.stderr.read().decode(errors="replace")[-800:]
