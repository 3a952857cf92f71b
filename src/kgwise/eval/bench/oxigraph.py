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

import httpx

from kgwise.errors import ConfigError, ServiceError
from kgwise.eval.bench.net import ServerProcess, free_port

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
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise ServiceError(f"oxigraph exited with {self.proc.returncode}: {err[-800:]}")
            try:
                if httpx.post(self.endpoint, data={"query": "ASK {}"}, timeout=2,
                              headers={"Accept": "application/sparql-results+json"}).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServiceError(f"oxigraph did not answer on {self.endpoint} within {timeout_s:.0f} s")
