"""Run many calls with bounded concurrency, writing each result to a JSONL file as it arrives.

A rerun with the same file skips every key already recorded as done, so an interrupted batch resumes
where it stopped and never repeats a finished call. Failed items are recorded too and retried on resume.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kgwise.errors import DataError, KgwiseError
from kgwise.files import ResumeLog
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


def read_done(path: Path, fingerprint: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """Records of a batch file (a :class:`~kgwise.files.ResumeLog` of ``fingerprint``): (key → result of
    done items, key → error of items not yet done)."""
    if not path.exists():
        return {}, {}
    return _records(ResumeLog(path, fingerprint))


def _records(log: ResumeLog) -> tuple[dict[str, Any], dict[str, str]]:
    done: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for key, rec in log.items():
        if not isinstance(rec, dict) or "ok" not in rec:
            raise DataError(f"not a batch record: key {key!r} has no 'ok'", log.path)
        if rec["ok"]:
            done[key] = rec.get("result")
        else:
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
    fingerprint: str = "",
) -> BatchReport:
    """Apply ``fn`` to each ``(key, payload)`` not yet done in ``out`` (a :class:`~kgwise.files.ResumeLog`
    of ``fingerprint``, what every result depends on); record ``{"ok", "result", "latency_s"}`` (or
    ``{"ok": false, "error"}``) per key as results arrive. ``fn`` must return a JSON-serialisable value; a
    ``KgwiseError`` it raises is recorded as a failure (retried on resume), any other exception stops the
    batch.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    path = Path(out)
    todo: list[tuple[str, P]] = []
    seen: set[str] = set()
    log = ResumeLog(path, fingerprint, fsync=fsync)
    done, _ = _records(log)
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

    def write(rec: dict[str, Any]) -> None:
        key = rec.pop("key")
        with lock:
            log.put(key, rec)
            if rec["ok"]:
                report.results[key] = rec["result"]
                report.failed.pop(key, None)
            else:
                report.failed[key] = rec["error"]
            report.ran += 1
            bar.update(1)

    if concurrency == 1:
        for key, payload in todo:
            write(work(key, payload))
    else:
        pool = ThreadPoolExecutor(max_workers=concurrency)
        try:  # each result is written as it arrives; an error stops the calls not yet started
            for f in as_completed([pool.submit(work, key, payload) for key, payload in todo]):
                write(f.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    bar.close()
    report.wall_s = time.perf_counter() - start
    return report
