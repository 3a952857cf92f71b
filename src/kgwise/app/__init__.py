"""The product (layer 4): one TOML config, one :class:`Pipeline` object behind every door; the CLI and the
server assemble nothing themselves, so they cannot disagree. Importing it loads neither torch,
sentence-transformers, matplotlib nor networkx.

* :mod:`~kgwise.app.config` — :class:`PipelineConfig`, read from ``kgwise.toml`` and validated strictly;
* :mod:`~kgwise.app.pipeline` — :class:`Pipeline`: ``answer`` / ``feedback`` / ``status`` / ``evidence``,
  and for external arms (models the caller runs) ``route`` / ``settle`` / ``cancel``
  (:mod:`~kgwise.app.external`);
* :mod:`~kgwise.app.fit` — :func:`fit` on labelled dev questions: router warm start, held-out calibration;
* :mod:`~kgwise.app.prompt_fit` — an inject arm's prompt bandit, learnt by ``fit`` on the dev log;
* :mod:`~kgwise.app.calibration` — the held-out calibration, re-selected by the router at every answer;
* :mod:`~kgwise.app.state` — the state directory (router, pending decisions, calibration, coverage);
* :mod:`~kgwise.app.arms`, :mod:`~kgwise.app.router` — arms at run time, the one adapter to the router;
* :mod:`~kgwise.app.evidence` — a question's KG evidence by label (:class:`Evidence`).

A single tool is a pipeline of one arm (``kgwise init --arm x=inject:LLM``): docs/single-arm.md.
"""

from kgwise.app.config import PipelineConfig
from kgwise.app.evidence import Evidence
from kgwise.app.external import Decision, Settlement
from kgwise.app.fit import FitReport, fit
from kgwise.app.pipeline import (
    AnswerSetResult,
    BudgetExceededError,
    FeedbackResult,
    Pipeline,
    PipelineResult,
    PipelineStatus,
    UnknownDecisionError,
)

__all__ = ["AnswerSetResult", "BudgetExceededError", "Decision", "Evidence", "FeedbackResult", "FitReport",
           "Pipeline", "PipelineConfig", "PipelineResult", "PipelineStatus", "Settlement",
           "UnknownDecisionError", "fit"]
