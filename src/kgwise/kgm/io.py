"""Save and load a KG model: the state dict in ``FILE`` and a JSON config beside it (``FILE.json``)."""

from __future__ import annotations

import json
import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from kgwise.errors import DataError
from kgwise.files import atomic_path
from kgwise.kgm.model import GraphQA, ModelConfig, TextQA, build_model

__all__ = ["FORMAT", "config_path", "load_model", "save_model"]

FORMAT = "kgwise-kgm"
VERSION = 1


def config_path(path: str | Path) -> Path:
    """The JSON config written beside the weights file ``path``."""
    p = Path(path)
    return p.with_name(p.name + ".json")


def save_model(path: str | Path, model: GraphQA | TextQA, meta: dict[str, Any]) -> Path:
    """Write ``model``'s state dict to ``path`` and ``{"format", "version", "model": ModelConfig, **meta}``
    to :func:`config_path`; returns the config's path."""
    p = Path(path)
    with atomic_path(p) as tmp:
        torch.save(model.state_dict(), tmp)
    cfg = {"format": FORMAT, "version": VERSION, "model": asdict(model.config), **meta}
    out = config_path(p)
    out.write_text(json.dumps(cfg, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def load_model(path: str | Path) -> tuple[GraphQA | TextQA, dict[str, Any]]:
    """The model (in eval mode) and its config dict; ``DataError`` names a missing or foreign file."""
    p = Path(path)
    cfg_file = config_path(p)
    if not p.is_file():
        raise DataError("KG model weights not found", p)
    if not cfg_file.is_file():
        raise DataError("KG model config not found (expected beside the weights)", cfg_file)
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"not JSON: {exc.msg}", cfg_file, exc.lineno) from exc
    if cfg.get("format") != FORMAT or cfg.get("version") != VERSION:
        raise DataError(f"not a {FORMAT} v{VERSION} config", cfg_file)
    model = build_model(ModelConfig(**cfg["model"]))
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except (RuntimeError, OSError, KeyError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise DataError(f"not the weights of a kgwise KG model ({type(exc).__name__}: {exc})", p) from exc
    model.eval()
    return model, cfg
