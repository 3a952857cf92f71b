"""Small file helpers: atomic writes (write a temporary sibling, then rename it over the target, so that a
reader or an interrupted run that resumes never sees a half-written file), JSON reading that names the
file and line of a fault, what resumable runs key their results by (:class:`ResumeLog`,
:func:`short_hash`, :func:`source_fingerprint`), and the ownership rules of files: one process owns a
state file through an OS lock beside its resolved path (:func:`owner_lock`), and no command writes over
one of its inputs or a file another process owns (:func:`distinct_outputs`).

Writes and locks go through the resolved path: writing through a symlink replaces the file it points
to (the link stays), and two spellings of one file (a symlink, ``a/../b``) share one lock."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import numpy as np
from filelock import FileLock, Timeout

from kgwise.errors import ConfigError, DataError

__all__ = [
    "ResumeLog", "TornLineWarning", "atomic_path", "distinct_outputs", "file_stamp", "is_owned",
    "matching_files", "owner_lock", "read_json", "read_jsonl", "savez_atomic", "short_hash",
    "source_fingerprint", "write_text_atomic",
]


@contextmanager
def atomic_path(path: str | Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``'s resolved target (its name, a part unique to this process
    and thread, then ``suffix``; parents created), so two writers of one file never share a temporary;
    when the block succeeds the temporary file replaces the target (a symlink ``path`` keeps pointing at
    it; the last writer wins), and whatever happens it does not outlive the block."""
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}{suffix}")
    try:
        yield tmp
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def owner_lock(path: str | Path) -> FileLock:
    """The OS lock that marks the process owning ``path`` (a file ``<resolved path>.lock`` beside it; the
    OS releases it when the process ends, even by a crash). Not yet acquired."""
    return FileLock(f"{Path(path).resolve()}.lock")


def is_owned(path: str | Path) -> bool:
    """Whether another process holds :func:`owner_lock` of ``path`` right now."""
    lock_file = Path(f"{Path(path).resolve()}.lock")
    if not lock_file.exists():
        return False
    lock = FileLock(str(lock_file))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False


def distinct_outputs(outputs: Mapping[str, Path | None], inputs: Mapping[str, Any]) -> None:
    """Refuse, before any work, an output file that is also an input (or another output) of the same
    command, or a file another process owns (:func:`owner_lock`): writing it would destroy what the command
    reads or what that process keeps (``--out`` on the questions file, ``--json`` on the calibration file
    or the config). ``inputs`` values are paths, path specs or lists of them
    (others are ignored: an endpoint, a glob). ``ConfigError`` naming both options."""
    def same(a: Path, b: Path) -> bool:
        try:
            return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
        except OSError:
            return False

    named_in = [(o, Path(p)) for o, v in inputs.items()
                for p in (v if isinstance(v, list | tuple) else [v]) if isinstance(p, str | Path) and p]
    named_out = [(o, p) for o, p in outputs.items() if p is not None]
    for i, (option, path) in enumerate(named_out):
        for other, src in named_in + named_out[:i]:
            if same(path, src):
                raise ConfigError(f"{option} {path} is also {other}: writing it would overwrite what this "
                                  "command reads or writes there; choose another file")
        if is_owned(path):
            raise ConfigError(f"{option} {path} is in use by another process: writing it would destroy "
                              "its state; choose another file")


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def savez_atomic(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """``np.savez`` of ``arrays`` to ``path`` atomically (the temporary name keeps the ``.npz`` ending,
    which ``np.savez`` would otherwise append)."""
    with atomic_path(path, ".tmp.npz") as tmp:
        np.savez(tmp, **arrays)
    return Path(path)


def read_json(path: str | Path) -> Any:
    """A whole JSON document; ``DataError`` naming the file (and the line of a syntax error) when it is
    missing or not JSON."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError as exc:
        raise DataError("file not found", path) from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg}", path, exc.lineno) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text: {exc.reason}", path) from exc


def read_jsonl(path: Path, what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line; a missing file (described as ``what``) or a line
    that is not valid UTF-8 or not a JSON object raises ``DataError`` naming file and line."""
    if not path.is_file():
        raise DataError(f"{what} not found", path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"not valid UTF-8 (byte {exc.start} of the line)", path, lineno) from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON: {exc.msg}", path, lineno) from exc
            if not isinstance(obj, dict):
                raise DataError("expected a JSON object", path, lineno)
            yield lineno, obj


def source_fingerprint(*modules: str) -> str:
    """A short hash of the source of ``modules`` (dotted names; a package counts all its ``.py`` files), so a
    resumable run can tell results of other code from its own and recompute them."""
    digest = hashlib.sha1()
    for name in sorted(modules):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"source_fingerprint: no module named {name!r}")
        origin = Path(spec.origin)
        files = sorted(origin.parent.rglob("*.py")) if spec.submodule_search_locations else [origin]
        for f in files:
            digest.update(f"{name}:{f.relative_to(origin.parent)}\n".encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


def matching_files(pattern: str | Path) -> list[Path]:
    """The paths matching ``pattern``'s last part when it holds a glob wildcard (``*``, ``?``, ``[``),
    e.g. ``data/test-*.parquet``, sorted; ``[]`` otherwise."""
    p = Path(pattern)
    return sorted(p.parent.glob(p.name)) if any(c in p.name for c in "*?[") else []


def file_stamp(path: str | Path) -> tuple[str, int, int]:
    """``(absolute path, size, mtime in ns)``: part of a cache key that changes when the file is edited.
    For a directory or a glob pattern: the total size and latest mtime of the files in it or matching it."""
    p = Path(path)
    if p.is_file():
        files = [p]
    else:
        files = sorted(f for f in (p.rglob("*") if p.is_dir() else matching_files(p)) if f.is_file())
    if not files:
        raise DataError("file not found", p)
    stats = [f.stat() for f in files]
    return str(p.resolve()), sum(st.st_size for st in stats), max(st.st_mtime_ns for st in stats)


def short_hash(obj: Any) -> str:
    """12 hex digits of the SHA-1 of ``obj`` as sorted-key JSON (non-JSON values by ``str``): a cache or
    run key."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


class TornLineWarning(UserWarning):
    """A resume log's last line was cut short by a crash and dropped (its result is recomputed)."""


class ResumeLog:
    """The results of a resumable run, keyed, in an append-only JSONL file (``path=None``: in memory).

    Line 1 is ``{"fingerprint": …}``, a hash of the run's settings (inputs, code) that every result depends
    on; then one ``{"key": …, "value": …}`` per result, appended (and flushed) as it finishes; a later line
    of a key replaces an earlier one. A file of another fingerprint is never mixed in: ``on_other="refuse"``
    raises ``ConfigError`` naming the file, ``"restart"`` starts it afresh (for fingerprints that include
    the code, whose change should recompute). A last line cut short by a crash is dropped with a
    :class:`TornLineWarning` (counted in :attr:`torn`); any other malformed line raises ``DataError`` naming
    file and line. ``put`` is thread-safe; ``fsync`` forces each line to disk."""

    def __init__(self, path: str | Path | None, fingerprint: str, *,
                 on_other: Literal["refuse", "restart"] = "refuse", fsync: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.fingerprint = fingerprint
        self.fsync = fsync
        self.torn = 0
        self.restarted = False
        self._rows: dict[str, Any] = {}
        self._lock = threading.Lock()
        if self.path is None:
            return
        if self.path.is_file() and self.path.stat().st_size > 0:
            found = self._read(self.path)
            if found == fingerprint:
                return
            if on_other == "refuse":
                raise ConfigError(f"{self.path} holds results of other settings (fingerprint {found!r}, "
                                  f"this run {fingerprint!r}); resume with the same settings, or choose "
                                  "another file or delete it")
            self._rows.clear()
            self.restarted = True
        write_text_atomic(self.path, json.dumps({"fingerprint": fingerprint}) + "\n")

    def _read(self, path: Path) -> Any:
        """Load the records of ``path`` and return its fingerprint."""
        data = path.read_bytes()
        lines = data.split(b"\n")
        complete = data.endswith(b"\n")
        if complete:
            lines.pop()  # the empty string after the last newline
        fingerprint: Any = None
        for n, raw in enumerate(lines, 1):
            last = n == len(lines)
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("expected a JSON object")
                if n == 1:
                    if "fingerprint" not in obj:
                        raise ValueError("the first line holds no fingerprint (not a resume log)")
                    fingerprint = obj["fingerprint"]
                else:
                    self._rows[str(obj["key"])] = obj["value"]
            except (ValueError, KeyError, UnicodeDecodeError) as exc:
                if last and not complete and n > 1:  # cut short by a crash: drop it, recompute its result
                    self.torn += 1
                    with path.open("rb+") as fh:
                        fh.truncate(len(data) - len(raw))
                    warnings.warn(f"{path}:{n}: dropped {self.torn} line cut short by an interrupted run; "
                                  "its result is recomputed", TornLineWarning, stacklevel=3)
                    return fingerprint
                what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
                raise DataError(f"not a resume log record: {what}", path, n) from exc
        if not complete:  # the last record is whole but lacks its newline
            with path.open("ab") as fh:
                fh.write(b"\n")
        return fingerprint

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def get(self, key: str, default: Any = None) -> Any:
        """The stored result of ``key``, else ``default``."""
        return self._rows.get(key, default)

    def items(self) -> list[tuple[str, Any]]:
        """``(key, result)`` of every stored result, in the order first stored."""
        with self._lock:
            return list(self._rows.items())

    def put(self, key: str, value: Any) -> None:
        """Store the JSON-able result ``value`` of ``key`` and append it to the file."""
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n"
        with self._lock:
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line)
                    fh.flush()
                    if self.fsync:
                        os.fsync(fh.fileno())
            self._rows[key] = value
