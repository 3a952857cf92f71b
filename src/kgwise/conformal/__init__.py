"""Calibrated answers: split conformal prediction, Learn-then-Test, and UAG (Ni et al. 2025).

* :mod:`~kgwise.conformal.scores` — S1, ``1 − cos`` of all-MiniLM-L6-v2 embeddings (or L1);
* :mod:`~kgwise.conformal.split` — Eq. 1 quantile, LAC/APS sets for multiple-choice probabilities;
* :mod:`~kgwise.conformal.ltt` — binomial / Hoeffding–Bentkus p-values, FWER control;
* :mod:`~kgwise.conformal.retriever` / :mod:`~kgwise.conformal.evaluator` — UAG's Eq. 4–5 BFS and Eq. 6;
* :mod:`~kgwise.conformal.grid` / :mod:`~kgwise.conformal.uag` — per-question tables, the λ grid, UAG;
* :mod:`~kgwise.conformal.tables` — the tables of a list of labelled questions, built resumably;
* :mod:`~kgwise.conformal.calibrated` — UAG calibrated on a user's KG, saved and used to answer.
* :mod:`~kgwise.conformal.grouped` — UAG's Learn-then-Test re-run on any group of its calibration questions.

Experiments and baselines (``kgwise eval uag``) live in :mod:`kgwise.eval.uag`.
"""

from kgwise.conformal.grid import QuestionTable, TableBatch
from kgwise.conformal.ltt import LTTConfig, control_fwer, learn_then_test
from kgwise.conformal.retriever import RetrieverConfig, UQRetriever
from kgwise.conformal.scores import S1, ScoreConfig
from kgwise.conformal.split import SplitConformal, SplitConformalConfig, conformal_quantile, label_set
from kgwise.conformal.uag import UAG, UAGConfig, question_table

__all__ = [
    "S1",
    "UAG",
    "LTTConfig",
    "QuestionTable",
    "RetrieverConfig",
    "ScoreConfig",
    "SplitConformal",
    "SplitConformalConfig",
    "TableBatch",
    "UAGConfig",
    "UQRetriever",
    "conformal_quantile",
    "control_fwer",
    "label_set",
    "learn_then_test",
    "question_table",
]
