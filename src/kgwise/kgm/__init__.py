"""Small KG-based QA models (the cheap Coke arms): a QA-GNN-style graph model and its text-only baseline,
trainable on a CPU."""

from kgwise.kgm.features import FeatureConfig, QuestionGraph
from kgwise.kgm.model import GraphQA, ModelConfig, TextQA, build_model
from kgwise.kgm.predictor import KGMPredictor
from kgwise.kgm.train import TrainConfig, TrainResult, evaluate, train_model

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
