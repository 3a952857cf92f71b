"""Run many calls with bounded concurrency, writing each result to a JSONL file as it arrives.

A rerun with the same file skips every key already recorded as done, so an interrupted batch resumes
where it stopped and never repeats a finished call. Failed items are recorded too and retried on resume.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kgwise.errors import DataError, KgwiseError
from kgwise.files import read_jsonl
from kgwise.progress import bar as progress_bar

__all__ = ["BatchReport", "read_done", "run_batch"]

P = TypeVar("P")


@dataclass
class BatchReport:
    """Outcome of a batch: ``results`` for every key done (this run or before), ``failed`` key → error."""

    results: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    ran: int = 0
    resumed: int = 0
    wall_s: float = 0.0


def _repair_tail(path: Path) -> None:
    """Cut a last line left half-written by a killed run, so appends start on a fresh line."""
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        pos = size - 1
        chunk = 4096
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            data = fh.read(pos - start)
            nl = data.rfind(b"\n")
            if nl >= 0:
                fh.truncate(start + nl + 1)
                return
            pos = start
        fh.truncate(0)


def read_done(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Records of a batch file: (key → result of done items, key → error of items not yet done)."""
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    if not path.exists():
        return done, failed
    _repair_tail(path)
    for lineno, rec in read_jsonl(path, "batch file"):
        try:
            key = str(rec["key"])
            ok = bool(rec["ok"])
        except KeyError as exc:
            raise DataError(f"not a batch record: no {exc}", path, lineno) from exc
        if ok:
            if key in done:
                raise DataError(f"key {key!r} recorded as done twice", path, lineno)
            done[key] = rec.get("result")
            failed.pop(key, None)
        elif key not in done:
            failed[key] = str(rec.get("error", ""))
    return done, failed


def run_batch(
    items: Iterable[tuple[str, P]],
    fn: Callable[[P], Any],
    out: str | Path,
    *,
    concurrency: int = 4,
    progress: bool = True,
    desc: str = "batch",
    fsync: bool = False,
) -> BatchReport:
    """Apply ``fn`` to each ``(key, payload)`` not yet done in ``out``; append ``{"key", "ok", "result"}``
    (or ``"error"``) lines as results arrive. ``fn`` must return a JSON-serialisable value; a
    ``KgwiseError`` it raises is recorded as a failure, any other exception stops the batch.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    todo: list[tuple[str, P]] = []
    seen: set[str] = set()
    done, _ = read_done(path)
    report = BatchReport(results=dict(done))
    for key, payload in items:
        key = str(key)
        if key in seen:
            raise ValueError(f"duplicate batch key {key!r}")
        seen.add(key)
        if key in done:
            report.resumed += 1
        else:
            todo.append((key, payload))
    lock = threading.Lock()
    start = time.perf_counter()
    bar = progress_bar(total=len(todo), desc=desc, enabled=None if progress else False, unit="call")

    def work(key: str, payload: P) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            result = fn(payload)
        except KgwiseError as exc:
            return {"key": key, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"key": key, "ok": True, "result": result, "latency_s": time.perf_counter() - t0}

    with path.open("a", encoding="utf-8") as fh:

        def write(rec: dict[str, Any]) -> None:
            line = json.dumps(rec, ensure_ascii=False) + "\n"
            with lock:
                fh.write(line)
                fh.flush()
                if fsync:
                    os.fsync(fh.fileno())
                if rec["ok"]:
                    report.results[rec["key"]] = rec["result"]
                    report.failed.pop(rec["key"], None)
                else:
                    report.failed[rec["key"]] = rec["error"]
                report.ran += 1
                bar.update(1)

        if concurrency == 1:
            for key, payload in todo:
                write(work(key, payload))
        else:
            pool = ThreadPoolExecutor(max_workers=concurrency)
            pending: set[Future[dict[str, Any]]] = set()
            queue = iter(todo)
            try:
                for key, payload in queue:
                    pending.add(pool.submit(work, key, payload))
                    if len(pending) >= 2 * concurrency:
                        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in finished:
                            write(f.result())
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        write(f.result())
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    bar.close()
    report.wall_s = time.perf_counter() - start
    return report
