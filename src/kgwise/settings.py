"""Hyper-parameter files: the frozen config values of kgwise's components, written to and read from TOML.

One file holds a table per component (``[coke]``, ``[path_agent]``, …, see :data:`SECTIONS`); a command
reads the tables it uses; a missing table or key keeps the command's default (the paper's, unless
:data:`COMMAND_DEFAULTS` names the command's own). ``kgwise eval config show`` prints those defaults as such a
file. Values are checked as strictly as JSON allows (``"2"`` is not a number, ``1`` is not a boolean)
and by each config's own checks; an unknown table or key is an error naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from pydantic import TypeAdapter, ValidationError

from kgwise.errors import ConfigError, DataError

__all__ = ["COMMAND_DEFAULTS", "SECTIONS", "command_default", "configured", "default", "defaults_toml",
           "on_demand", "read_section", "section_class", "table", "to_toml"]

SECTIONS: dict[str, type[Any]] = {}
"""Table name → the config class it holds (:func:`table`); listed in alphabetical order."""

COMMAND_DEFAULTS: dict[str, Any] = {}
"""Tables whose commands start from other values than the class's (the paper's) defaults."""

_T = TypeVar("_T")


def table(name: str) -> Callable[[type[_T]], type[_T]]:
    """Class decorator: register a frozen config dataclass as the TOML table ``[name]``. Each package
    registers its own tables when it is imported (``import kgwise.app`` registers them all)."""

    def register(cls: type[_T]) -> type[_T]:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"[{name}]: {cls.__name__} is not a dataclass")
        if SECTIONS.get(name, cls) is not cls:
            raise ConfigError(f"config table [{name}] is registered twice")
        SECTIONS[name] = cls
        return cls

    return register


def command_default(name: str, cfg: Any) -> None:
    """Make ``cfg`` what the commands reading table ``[name]`` start from instead of the class's defaults."""
    if not isinstance(cfg, section_class(name)):
        raise ConfigError(f"[{name}] holds a {section_class(name).__name__}, not a {type(cfg).__name__}")
    COMMAND_DEFAULTS[name] = cfg


_LOADERS: list[Callable[[], None]] = []


def on_demand(loader: Callable[[], None]) -> None:
    """Run ``loader`` (which imports the modules that register tables) the first time the registry is read
    as a whole: the command line and :mod:`kgwise.app` install one, so that this module never reaches up."""
    _LOADERS.append(loader)


def _complete() -> None:
    while _LOADERS:
        _LOADERS.pop(0)()


def section_class(name: str) -> type[Any]:
    """The config class of table ``name``; ``ConfigError`` listing the tables for an unknown one. The
    registry is completed (:func:`on_demand`) only when ``name`` is not registered yet, so a module that
    registers a default for its own table loads no other package (a core install has no torch)."""
    if name not in SECTIONS:
        _complete()
    if name not in SECTIONS:
        raise ConfigError(f"unknown config table [{name}]; the tables are {', '.join(sorted(SECTIONS))}")
    return SECTIONS[name]


def _plain(value: Any) -> Any:
    """``dataclasses.asdict`` output without its ``None`` (unset) fields, which TOML cannot write: read
    back, a missing key takes the default, ``None`` for every such field of these configs."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    return value


def to_toml(section: str, cfg: Any) -> str:
    """``cfg`` as the TOML table ``[section]``, under its docstring's first paragraph as a comment."""
    cls = section_class(section)
    if not isinstance(cfg, cls):
        raise ConfigError(f"[{section}] holds a {cls.__name__}, not a {type(cfg).__name__}")
    doc = (type(cfg).__doc__ or "").strip().split("\n\n")[0]
    head = "".join(f"# {line.strip()}\n" for line in doc.splitlines() if line.strip())
    return head + tomli_w.dumps({section: _plain(dataclasses.asdict(cfg))})


def default(section: str) -> Any:
    """The config the commands reading table ``section`` start from (:data:`COMMAND_DEFAULTS`, else the
    class's defaults)."""
    _complete()  # command defaults included
    cls = section_class(section)
    return COMMAND_DEFAULTS[section] if section in COMMAND_DEFAULTS else cls()


def defaults_toml(sections: Iterable[str] | None = None) -> str:
    """What the commands start from, for ``sections`` (default: all), as one TOML file."""
    _complete()
    return "\n".join(to_toml(s, default(s)) for s in (sections or sorted(SECTIONS)))


def _unknown_keys(cls: type, data: dict[str, Any], where: str) -> list[str]:
    """The keys of ``data`` that are not fields of the config ``cls``, nested configs included."""
    defaults = cls()
    names = {f.name for f in dataclasses.fields(defaults)}
    bad = []
    for key, value in data.items():
        if key not in names:
            bad.append(f"{where}.{key}")
        elif isinstance(value, dict) and dataclasses.is_dataclass(nested := getattr(defaults, key)):
            bad += _unknown_keys(type(nested), value, f"{where}.{key}")
    return bad


def _merged(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in given.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict)
        out[key] = _merged(base[key], value) if both else value
    return out


def read_section(path: str | Path, section: str, base: Any = None) -> Any:
    """The config of table ``[section]`` of the TOML file ``path``: ``base`` (default: :func:`default`)
    with the keys the file gives. ``DataError`` naming the file for malformed TOML, an unknown
    table or key, or a value of the wrong type or out of range."""
    p = Path(path)
    cls = section_class(section)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("config file not found", p) from None
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"not valid TOML: {exc}", p) from exc
    unknown = [k for k in doc if k not in SECTIONS]
    if unknown:
        raise DataError(f"unknown table(s) {', '.join(f'[{k}]' for k in unknown)}; the tables are "
                        f"{', '.join(sorted(SECTIONS))}", p)
    data = doc.get(section, {})
    if not isinstance(data, dict):
        raise DataError(f"{section} must be a table ([{section}]), not a value", p)
    bad = _unknown_keys(cls, data, section)
    if bad:
        keys = ", ".join(f.name for f in dataclasses.fields(cls))
        raise DataError(f"unknown key(s) {', '.join(bad)}; [{section}] has {keys} (`kgwise eval config show "
                        f"{section}` prints them with their defaults)", p)
    try:
        full = _merged(_plain(dataclasses.asdict(base if base is not None else default(section))), data)
        return TypeAdapter(cls).validate_json(json.dumps(full, default=str), strict=True)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in (section, *err["loc"]))
            lines.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
        raise DataError("; ".join(lines), p) from exc


def configured(section: str, path: str | Path | None = None, base: Any = None, **overrides: Any) -> Any:
    """The config of table ``section``: ``base`` (default: :func:`default`) with what the file
    ``path`` gives, then the ``overrides`` that are not ``None`` (command-line options win over the
    file)."""
    if path is not None:
        cfg = read_section(path, section, base)
    else:
        cfg = base if base is not None else default(section)
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(cfg, **given) if given else cfg
