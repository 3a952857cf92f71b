"""The product (layer 4): where kgwise's parts are assembled for a user, so the CLI and the server share one
behaviour — the calibrated KnowGPT answer (:class:`KnowGPTApp`) and UAG's calibrated answer set
(:class:`UAGApp`). Importing it loads neither torch, sentence-transformers, matplotlib nor networkx."""

from kgwise.app.answer_sets import AnswerSetResult, UAGApp, UAGStatus
from kgwise.app.knowgpt import CalibratedAnswer, KnowGPTApp

__all__ = ["AnswerSetResult", "CalibratedAnswer", "KnowGPTApp", "UAGApp", "UAGStatus"]
