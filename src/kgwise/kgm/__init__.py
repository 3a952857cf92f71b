"""Small KG-based QA models (the cheap Coke arms): a QA-GNN-style graph model and its text-only baseline,
trainable on a CPU. The names below load PyTorch (the ``ml`` extra), so they are imported on first use:
importing :mod:`kgwise.kgm.config` (the ``[kgm_*]`` tables) does not need it."""

from __future__ import annotations

from kgwise.lazy import lazy_exports

__all__ = [
    "FeatureConfig",
    "GraphQA",
    "KGMPredictor",
    "ModelConfig",
    "QuestionGraph",
    "TextQA",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "evaluate",
    "train_model",
]

_LAZY = {"FeatureConfig": "features", "QuestionGraph": "features", "GraphQA": "model", "ModelConfig": "model",
         "TextQA": "model", "build_model": "model", "KGMPredictor": "predictor", "TrainConfig": "train",
         "TrainResult": "train", "evaluate": "train", "train_model": "train"}

__getattr__ = lazy_exports(__name__, _LAZY)
