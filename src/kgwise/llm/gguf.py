"""The header of a GGUF file (metadata key–values and tensor shapes) read without loading the model.

The layout is GGUF's (ggml's ``docs/gguf.md``, versions 2 and 3, little-endian): ``"GGUF"``, ``uint32``
version, ``uint64`` tensor count, ``uint64`` key–value count; then the key–values (a string key, a
``uint32`` value type, the value), then per tensor its name, ``uint32`` dimension count, ``uint64``
dimensions, ``uint32`` ggml type and ``uint64`` data offset. Strings are a ``uint64`` length and UTF-8 bytes.

The file may come from anywhere, so the reader trusts none of its counts: a string, array or count beyond
the bounds below, or a file that ends early, is a :class:`GGUFError` naming the byte offset. Long arrays
(the tokenizer's vocabulary) are skipped and kept as their length only.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["FILE_TYPES", "GGUFError", "GGUFHeader", "read_gguf_header"]

MAGIC = b"GGUF"
MAX_STRING_BYTES = 16 << 20
MAX_ARRAY_ITEMS = 1 << 24
MAX_COUNT = 1 << 20
KEPT_ARRAY_ITEMS = 64
"""Arrays longer than this are kept as their length (an ``int``), not their items."""

_SCALARS: dict[int, str] = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

FILE_TYPES: dict[int, str] = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
                              10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S",
                              15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}
"""``general.file_type`` → its name (llama.cpp's ``llama_ftype``; the quantisation of most tensors)."""

Value = int | float | bool | str | list["Value"]


class GGUFError(ValueError):
    """The file is not a well-formed GGUF header."""


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """A GGUF file's ``metadata`` and its tensors' ``shapes`` (name → dimensions)."""

    path: Path
    version: int
    metadata: Mapping[str, Value]
    shapes: Mapping[str, tuple[int, ...]]

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", ""))

    @property
    def file_type(self) -> str:
        """The quantisation name of ``general.file_type`` (``"?"`` when absent, the number when unknown)."""
        code = self.metadata.get("general.file_type")
        if not isinstance(code, int):
            return "?"
        return FILE_TYPES.get(code, str(code))

    @property
    def n_params(self) -> int:
        """Parameters: the sum over tensors of the product of their dimensions."""
        return sum(math.prod(dims) for dims in self.shapes.values())

    def arch_int(self, key: str) -> int | None:
        """``{architecture}.{key}`` as an int (``None`` when absent)."""
        value = self.metadata.get(f"{self.architecture}.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class _GGUFReader:
    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"{self.path}: byte {self.f.tell()}: {what}")

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail(f"the file ends early (wanted {n} bytes, got {len(data)})")
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self, what: str, limit: int) -> int:
        n = int(self.unpack("<Q"))
        if n > limit:
            raise self.fail(f"{what} {n} is over the reader's bound {limit}")
        return n

    def string(self) -> str:
        raw = self.take(self.count("string length", MAX_STRING_BYTES))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"a string is not UTF-8: {exc}") from None

    def value(self, kind: int) -> Value:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item = int(self.unpack("<I"))
            n = self.count("array length", MAX_ARRAY_ITEMS)
            if item == _ARRAY:
                raise self.fail("nested arrays are not supported")
            if n > KEPT_ARRAY_ITEMS:
                self.skip(item, n)
                return n
            return [self.value(item) for _ in range(n)]
        raise self.fail(f"unknown value type {kind}")

    def skip(self, kind: int, n: int) -> None:
        if kind in _SCALARS:
            self.take(struct.calcsize(_SCALARS[kind]) * n)
        elif kind == _STRING:
            for _ in range(n):
                self.take(self.count("string length", MAX_STRING_BYTES))
        else:
            raise self.fail(f"unknown array item type {kind}")


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """The metadata and tensor shapes of the GGUF file at ``path`` (see the module docstring), read once
    per version of the file (its size and modification time): verifying a shipped model and loading it
    read one header."""
    p = Path(path)
    st = p.stat()
    return _read_header(p, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_header(p: Path, size: int, mtime_ns: int) -> GGUFHeader:
    with p.open("rb") as f:
        r = _GGUFReader(f, p)
        if f.read(4) != MAGIC:
            raise GGUFError(f"{p}: not a GGUF file (it does not start with 'GGUF')")
        version = int(r.unpack("<I"))
        if version not in (2, 3):
            raise r.fail(f"GGUF version {version} is not supported (2 or 3)")
        n_tensors = r.count("tensor count", MAX_COUNT)
        n_kv = r.count("key-value count", MAX_COUNT)
        metadata: dict[str, Value] = {}
        for _ in range(n_kv):
            key = r.string()
            metadata[key] = r.value(int(r.unpack("<I")))
        shapes: dict[str, tuple[int, ...]] = {}
        for _ in range(n_tensors):
            name = r.string()
            n_dims = int(r.unpack("<I"))
            if n_dims > 8:
                raise r.fail(f"tensor {name!r} has {n_dims} dimensions (at most 8)")
            shapes[name] = tuple(int(r.unpack("<Q")) for _ in range(n_dims))
            r.unpack("<I")  # ggml type
            r.unpack("<Q")  # data offset
    return GGUFHeader(p, version, metadata, shapes)
