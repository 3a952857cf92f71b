"""GGUF models shipped on PyPI split into wheels: assembled once into the model cache, verified, then used.

Some GGUF files are published as a series of wheels, each holding one slice of the file as
``<module>/data/partNN.bin``. Those wheels come from unknown uploaders and carry no licence, so they are
treated as untrusted data: their Python code is never imported (a part is located with
``importlib.util.find_spec``, which does not run it), and the assembled file is used only when

1. every part has the size and SHA-256 pinned in its :class:`Part` (a missing or corrupt part is named);
2. the concatenation has the pinned size and SHA-256;
3. the GGUF header, read without loading the model (:mod:`kgwise.llm.gguf`), says the pinned architecture,
   ``general.name``, quantisation (``general.file_type``) and parameter count.

Otherwise a :class:`ModelVerificationError` names the package and what differs, before llama.cpp sees the
file. Assembly writes to a temporary file renamed into place when it is verified; a ``.verified`` stamp
beside it (its size, modification time and SHA-256) lets later loads skip re-hashing the file, and a file
that changed since (another size or time) is hashed and checked again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kgwise.errors import ConfigError
from kgwise.files import atomic_path
from kgwise.llm.gguf import GGUFError, GGUFHeader, read_gguf_header

__all__ = ["ModelVerificationError", "Part", "SplitGGUF", "assemble", "check_header", "ensure_assembled"]

_CHUNK = 8 << 20


class ModelVerificationError(ConfigError):
    """A shipped model's parts or assembled file are not the pinned ones."""


@dataclass(frozen=True, slots=True)
class Part:
    """One wheel's slice: the PyPI ``package`` (distribution name), its ``index`` (1-based, the ``NN`` of
    ``data/partNN.bin``), and the slice's pinned ``size_bytes`` and ``sha256``."""

    package: str
    index: int
    size_bytes: int
    sha256: str

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")

    @property
    def relative_path(self) -> Path:
        return Path(self.module) / "data" / f"part{self.index:02d}.bin"


@dataclass(frozen=True, slots=True)
class SplitGGUF:
    """A GGUF split into wheels: its ``parts`` in order (all of version ``version``), the ``extra`` that
    installs them, the pinned ``sha256``/``size_bytes`` of the assembled ``file_name``, and the pinned
    header fields (``architecture``, ``gguf_name``, ``file_type``, ``n_params``: tensor elements)."""

    file_name: str
    version: str
    extra: str
    parts: tuple[Part, ...]
    size_bytes: int
    sha256: str
    architecture: str
    gguf_name: str
    file_type: str
    n_params: int

    @property
    def packages(self) -> str:
        """How messages name the wheels: ``first … last==version``."""
        return f"{self.parts[0].package} … {self.parts[-1].package} (=={self.version})"

    def install_hint(self) -> str:
        return (f"pip install 'kgwise[{self.extra}]' (or pip install "
                f"{' '.join(f'{p.package}=={self.version}' for p in self.parts)})")


def _installed_part(part: Part, spec: SplitGGUF) -> Path:
    """Where ``part`` is installed, located without importing it."""
    found = importlib.util.find_spec(part.module)
    if found is None or not found.submodule_search_locations:
        raise ModelVerificationError(f"{spec.file_name}: part {part.index} of {len(spec.parts)}, the "
                                     f"package {part.package}=={spec.version}, is not installed; "
                                     f"{spec.install_hint()}")
    return Path(next(iter(found.submodule_search_locations))).parent / part.relative_path


def part_paths(spec: SplitGGUF, roots: Sequence[Path] | None = None) -> list[Path]:
    """The part files in order: under the first of ``roots`` that has each (a folder laid out like
    site-packages), or where the packages are installed (``roots=None``)."""
    if roots is None:
        return [_installed_part(p, spec) for p in spec.parts]
    out = []
    for p in spec.parts:
        hits = [r / p.relative_path for r in roots if (r / p.relative_path).is_file()]
        if not hits:
            raise ModelVerificationError(f"{spec.file_name}: part {p.index} of {len(spec.parts)}, the "
                                         f"package {p.package}=={spec.version}, is missing: no "
                                         f"{p.relative_path} under {', '.join(map(str, roots))}")
        out.append(hits[0])
    return out


def check_header(header: GGUFHeader, spec: SplitGGUF) -> None:
    """``ModelVerificationError`` listing every pinned header field that differs."""
    found = {"architecture": header.architecture, "general.name": header.name,
             "quantisation": header.file_type, "parameters": header.n_params}
    wanted = {"architecture": spec.architecture, "general.name": spec.gguf_name,
              "quantisation": spec.file_type, "parameters": spec.n_params}
    diffs = [f"{k} is {found[k]!r}, not {wanted[k]!r}" for k in wanted if found[k] != wanted[k]]
    if diffs:
        raise ModelVerificationError(f"{header.path} is not {spec.file_name} from {spec.packages}: "
                                     + "; ".join(diffs) + " — refused before loading")


def assemble(spec: SplitGGUF, target: Path, roots: Sequence[Path] | None = None) -> Path:
    """Concatenate the parts into ``target`` (atomically), checking each part and the whole (see the module
    docstring); ``roots``: where the parts lie (default: the installed packages). Returns ``target``."""
    paths = part_paths(spec, roots)
    for part, path in zip(spec.parts, paths, strict=True):
        size = path.stat().st_size
        if size != part.size_bytes:
            raise ModelVerificationError(f"{spec.file_name}: part {part.package}=={spec.version} ({path}) is "
                                         f"{size} bytes, not {part.size_bytes}: corrupt or truncated; "
                                         "reinstall it")
    try:
        header = read_gguf_header(paths[0])  # the header lies in the first part
    except GGUFError as exc:
        raise ModelVerificationError(f"{spec.file_name}: part {spec.parts[0].package}: {exc}") from None
    check_header(header, spec)
    whole = hashlib.sha256()
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target, ".part") as tmp, tmp.open("wb") as out:
        for part, path in zip(spec.parts, paths, strict=True):
            one = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    one.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
            if one.hexdigest() != part.sha256:
                raise ModelVerificationError(
                    f"{spec.file_name}: part {part.package}=={spec.version} ({path}) has SHA-256 "
                    f"{one.hexdigest()}, not the pinned {part.sha256}: corrupt or replaced; reinstall it")
        if whole.hexdigest() != spec.sha256:
            raise ModelVerificationError(f"{spec.file_name} assembled from {spec.packages} has SHA-256 "
                                         f"{whole.hexdigest()}, not the pinned {spec.sha256}")
    _write_stamp(target, spec.sha256)
    return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stat_key(target: Path) -> dict[str, int]:
    st = target.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_stamp(target: Path, sha256: str) -> None:
    _stamp_path(target).write_text(json.dumps(_stat_key(target) | {"sha256": sha256}), encoding="utf-8")


def _stamped(target: Path, sha256: str) -> bool:
    try:
        stamp = json.loads(_stamp_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == _stat_key(target) | {"sha256": sha256}


def verify_file(spec: SplitGGUF, path: Path) -> None:
    """Check an assembled file: header, size and (unless its stamp still matches) SHA-256."""
    try:
        check_header(read_gguf_header(path), spec)
    except GGUFError as exc:
        raise ModelVerificationError(f"{spec.file_name} ({spec.packages}): {exc}") from None
    size = path.stat().st_size
    if size != spec.size_bytes:
        raise ModelVerificationError(f"{path} is {size} bytes, not the {spec.size_bytes} of {spec.file_name} "
                                     f"from {spec.packages}")
    if _stamped(path, spec.sha256):
        return
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    if h.hexdigest() != spec.sha256:
        raise ModelVerificationError(f"{path} has SHA-256 {h.hexdigest()}, not the pinned {spec.sha256} of "
                                     f"{spec.file_name} from {spec.packages}; delete it to reassemble")
    _write_stamp(path, spec.sha256)


def ensure_assembled(spec: SplitGGUF, cache: Path, roots: Sequence[Path] | None = None) -> Path:
    """The verified file ``cache/file_name``, assembled from the parts the first time."""
    target = cache / spec.file_name
    if not target.exists():
        return assemble(spec, target, roots)
    verify_file(spec, target)
    return target
