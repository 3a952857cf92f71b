"""The folder state's durable pieces: a framed, checksummed journal that survives faults, a spend mark
that only grows, and a lock on the state directory itself.

Framing. Each event is one JSON line whose last key is ``"crc"``: the CRC-32 (zlib) of the line's JSON
text without that key, i.e. ``crc32(body)`` where the line is ``body[:-1] + ', "crc": "%08x"}'``. A line
stays plain JSONL (``jq`` reads it); a line cut short by a kill or a full disk, or changed on disk, fails
its check. A line without ``"crc"`` is an event of the previous journal format (unframed) and is read as
it is (migrated on read: the next snapshot holds it, the events after it are framed) — if it holds only
the keys that format had (:data:`LEGACY_KEYS`), so that a damaged frame is not read as an old line.
:func:`read_events`
returns the good events and each bad line (file, line, byte offset, reason); the caller sets the bad bytes
aside in ``set-aside/`` (:func:`set_aside`) and replays the rest — nothing is dropped unnamed.

Faults (:class:`Journal`). Events are appended with ``os.write`` and made durable by ``fsync``. The lines
written since the last successful fsync are also kept in memory. Any write or fsync error marks the
journal *failed*: :meth:`Journal.sync` raises :class:`StateReadOnlyError`, so no answer or feedback is
acknowledged that is not on disk (after a failed fsync Linux may drop the dirty pages and report success
next time, so a later fsync proves nothing). Recovery, tried at most every :data:`RETRY_AFTER_S`, cuts the
file back to the end of the last synced line and writes the kept lines again, then fsyncs; only then does
the journal take writes again. Events that happened while failed (an answer whose arm had already run)
are in the kept lines too: their cost is paid once the journal recovers, or lost with the process — never
both acknowledged and missing.

Spend mark (:class:`SpendMark`). ``spend`` holds the spend of the last synced event (written in place
after each fsync of the journal, fsync'ed at snapshots). Opening the state takes the larger of the
replayed spend and the mark, so an emptied or deleted journal (or snapshot) does not roll spend back.

Lock (:class:`DirectoryLock`). ``flock`` on a descriptor of the state directory itself: no file a user can
delete stands for it; the directory's identity (device, inode) is checked before each write, so a state
directory removed and re-created under a running process turns it read-only instead of letting two
processes write one state.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError, KgwiseError

__all__ = ["RETRY_AFTER_S", "BadLine", "DirectoryLock", "Journal", "SpendMark", "StateReadOnlyError", "frame",
           "read_events", "set_aside", "unframe"]

RETRY_AFTER_S = 5
"""Seconds a read-only state waits before it tries to write again (and the HTTP ``Retry-After``)."""
SET_ASIDE = "set-aside"

_CRC = re.compile(rb', "crc": "([0-9a-f]{8})"\}\n?$')
LEGACY_KEYS = frozenset({"seq", "op", "decision", "x", "costs", "arm", "pending", "reward", "observed",
                         "covered"})
"""The keys events of the previous, unframed format have: an unframed line with another key is a framed
line whose frame was damaged."""


class StateReadOnlyError(KgwiseError):
    """The state cannot be written (a full disk, an I/O error, its directory replaced): nothing new is
    acknowledged until a write succeeds again; retry after ``retry_after_s`` seconds."""

    def __init__(self, message: str, retry_after_s: float = RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def frame(body: str) -> bytes:
    """One journal line: ``body`` (a JSON object's text) with its CRC-32 as the last key."""
    data = body.encode("utf-8")
    return data[:-1] + b', "crc": "%08x"}\n' % zlib.crc32(data)


def unframe(line: bytes) -> dict[str, Any]:
    """The event of one journal line (framed, or of the previous unframed format); ``ValueError`` naming
    why a line is torn or corrupt."""
    if not line.endswith(b"\n"):
        raise ValueError("torn: the line has no end (cut by a kill or a full disk)")
    m = _CRC.search(line)
    if m is not None:
        body = line[:m.start()] + b"}"
        if zlib.crc32(body) != int(m.group(1), 16):
            raise ValueError("corrupt: its checksum does not match")
    else:
        body = line
    try:
        event = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"corrupt: not JSON ({exc})") from None
    if not isinstance(event, dict):
        raise ValueError("corrupt: not a JSON object")
    if m is None and not event.keys() <= LEGACY_KEYS:
        raise ValueError("corrupt: its checksum is missing or damaged")
    return event


@dataclass(frozen=True, slots=True)
class BadLine:
    """A journal line that was not replayed: where it was (``path``, 1-based ``line``, byte ``offset``),
    its bytes and why."""

    path: str
    line: int
    offset: int
    data: bytes
    reason: str

    def describe(self) -> str:
        return f"{self.path}:{self.line} (byte {self.offset}, {len(self.data)} bytes): {self.reason}"


def read_events(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], list[BadLine], int]:
    """``(events, bad lines, good end)`` of one journal file: each good event with its line number, each
    line that is torn or corrupt, and the byte offset just past the last good line."""
    events: list[tuple[int, dict[str, Any]]] = []
    bad: list[BadLine] = []
    good_end = offset = 0
    data = path.read_bytes() if path.exists() else b""
    for n, line in enumerate(data.splitlines(keepends=True), 1):
        offset += len(line)
        if not line.strip() and line.endswith(b"\n"):
            continue
        try:
            events.append((n, unframe(line)))
            good_end = offset
        except ValueError as exc:
            bad.append(BadLine(str(path), n, offset - len(line), line, str(exc)))
    return events, bad, good_end


def set_aside(root: Path, bad: list[BadLine]) -> Path:
    """Keep the bytes of ``bad`` lines (and where they were) in ``set-aside/`` under ``root``, fsync'ed;
    named by a hash of their content, so setting the same lines aside twice writes one file."""
    folder = root / SET_ASIDE
    folder.mkdir(exist_ok=True)
    body = b"".join(json.dumps({"path": b.path, "line": b.line, "offset": b.offset, "reason": b.reason,
                                "bytes": b.data.decode("utf-8", "backslashreplace")},
                               ensure_ascii=False).encode("utf-8") + b"\n" for b in bad)
    path = folder / f"journal-{zlib.crc32(body):08x}.jsonl"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
        _fsync_dir(folder)
    return path


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "write wrote nothing")
        view = view[n:]
    return len(data)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Fsync = Callable[[int], None]


class Journal:
    """An append-only journal file that refuses to acknowledge what is not on disk (module docstring).
    ``fsync``: how a descriptor is made durable (``os.fsync``; a test passes a failing double); ``check``:
    called before each fsync or recovery, raises ``OSError`` when writing must not go on; ``failure``: an
    error that makes the journal read-only from the start (its torn tail could not be set aside yet: the
    file is cut back to ``end`` only once ``check`` has set it aside)."""

    def __init__(self, path: Path, fsync: Fsync = os.fsync, check: Callable[[], None] | None = None,
                 end: int | None = None, failure: OSError | None = None) -> None:
        self.path = path
        self._fsync = fsync
        self._check = check  # raises OSError when the directory is no longer the one locked
        self._io = threading.Lock()  # the descriptor, the kept lines, the failure
        self._sync_lock = threading.Lock()  # one fsync or recovery at a time
        self._fd = self._open()
        self._synced_end = os.fstat(self._fd).st_size if end is None else end
        self._kept: list[tuple[int, bytes, float]] = []  # (seq, line, spend after it) since the last fsync
        self._written_seq = self._synced_seq = 0
        self.failure: OSError | None = failure
        self._last_try = 0.0
        self.bytes_written = 0

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def read_only(self) -> bool:
        return self.failure is not None

    def append(self, seq: int, body: str, spent: float) -> None:
        """Write the event ``body`` (JSON text) framed; ``spent``: the spend once it is applied. A write
        error marks the journal failed (:meth:`sync` raises); the line is kept to be written again."""
        line = frame(body)
        with self._io:
            self._kept.append((seq, line, spent))
            self._written_seq = seq
            self.bytes_written += len(line)
            if self.failure is None:
                try:
                    _write_all(self._fd, line)
                except OSError as exc:
                    self.failure = exc

    def _error(self) -> StateReadOnlyError:
        exc = self.failure
        why = (exc.strerror or str(exc)) if exc is not None else "unknown"
        return StateReadOnlyError(f"the state's journal {self.path} cannot be written ({why}); nothing new "
                                  "is acknowledged until a write succeeds again (tried every "
                                  f"{RETRY_AFTER_S} s)")

    def sync(self) -> float | None:
        """Make every event appended so far durable; the spend after the last one synced now (``None``:
        nothing new). :class:`StateReadOnlyError` while it cannot (recovery is tried here, at most every
        :data:`RETRY_AFTER_S`)."""
        with self._sync_lock:
            if self.failure is not None:
                return self._recover()
            target = self._written_seq
            if self._synced_seq >= target:
                return None
            try:
                if self._check is not None:
                    self._check()
                self._fsync(self._fd)
            except OSError as exc:
                with self._io:
                    self.failure = exc
                raise self._error() from exc
            with self._io:
                done = [k for k in self._kept if k[0] <= target]
                self._kept = self._kept[len(done):]
                self._synced_end += sum(len(line) for _, line, _ in done)
                self._synced_seq = target
            return done[-1][2] if done else None

    def retry(self) -> None:
        """While failed: :class:`StateReadOnlyError` (or a recovery, when :data:`RETRY_AFTER_S` passed
        since the last try)."""
        if self.failure is None:
            return
        with self._sync_lock:
            if self.failure is not None:
                self._recover()

    def _recover(self) -> float | None:
        """Under the sync lock: cut the file to its last synced line, write the kept lines again, fsync;
        raise while that fails or it is too soon to try."""
        now = time.monotonic()
        if now - self._last_try < RETRY_AFTER_S:
            raise self._error()
        self._last_try = now
        with self._io:
            try:
                if self._check is not None:
                    self._check()
                if self._fd < 0:
                    self._fd = self._open()
                os.ftruncate(self._fd, self._synced_end)
                for _, line, _ in self._kept:
                    _write_all(self._fd, line)
                self._fsync(self._fd)
            except OSError as exc:
                self.failure = exc
                raise self._error() from exc
            self.failure = None
            self._synced_end += sum(len(line) for _, line, _ in self._kept)
            self._synced_seq = self._written_seq
            spent = self._kept[-1][2] if self._kept else None
            self._kept.clear()
            return spent

    def set_aside_to(self, segment: Path) -> None:
        """Under the caller's lock, everything synced: rename the file to ``segment`` and start a new one."""
        with self._sync_lock, self._io:
            if self.failure is not None or self._kept:
                raise self._error() if self.failure is not None else StateReadOnlyError("journal not synced")
            os.close(self._fd)
            self._fd = -1
            try:
                self.path.replace(segment)
            finally:
                try:
                    self._fd = self._open()
                except OSError as exc:
                    self.failure = exc
            self._synced_end = 0
            self.bytes_written = 0

    def close(self) -> None:
        with self._io:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class SpendMark:
    """``spend``: the highest spend made durable, rewritten in place (one short line with a CRC-32)."""

    WIDTH = 64

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problem: str | None = None
        self.value = self._read()
        self._fd: int | None = None

    def _read(self) -> float:
        if not self.path.exists():
            return 0.0
        raw = self.path.read_bytes()
        m = re.fullmatch(rb"kgwise-spend (\S+) ([0-9a-f]{8}) *\n", raw)
        if m is None or zlib.crc32(m.group(1)) != int(m.group(2), 16):
            self.problem = f"{self.path}: unreadable spend mark (ignored; snapshot and journal hold spend)"
            return 0.0
        try:
            value = float(m.group(1))
        except ValueError:
            self.problem = f"{self.path}: unreadable spend mark (ignored)"
            return 0.0
        return value if value >= 0 and value == value and value != float("inf") else 0.0

    def raise_to(self, spent: float, durable: bool = False) -> None:
        """Write ``spent`` when it is above the mark (``durable``: fsync too). Errors are left to the
        journal to report: the mark is a floor, the journal the record."""
        if spent <= self.value and not durable:
            return
        value = max(spent, self.value)
        num = repr(float(value)).encode("ascii")
        line = b"kgwise-spend %s %08x" % (num, zlib.crc32(num))
        line = line.ljust(self.WIDTH - 1) + b"\n"
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(self._fd, line, 0)
            if durable:
                os.fsync(self._fd)
            self.value = value
        except OSError:
            pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class DirectoryLock:
    """An exclusive ``flock`` on the directory ``root`` itself (module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"the state directory {root} is in use by another kgwise process (a running "
                              "`kgwise serve`?); stop it first or use another --state") from None
        st = os.fstat(fd)
        self._fd = fd
        self.identity = (st.st_dev, st.st_ino)

    def check(self) -> None:
        """``OSError`` when ``root`` is no longer the directory locked (removed or replaced)."""
        try:
            st = self.root.stat()
        except OSError as exc:
            raise OSError(errno.ESTALE, f"the state directory {self.root} was removed") from exc
        if (st.st_dev, st.st_ino) != self.identity:
            raise OSError(errno.ESTALE, f"the state directory {self.root} was replaced by another one")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = -1
