"""The product (layer 4): one TOML config, one :class:`Pipeline` object behind every door.

* :mod:`~kgwise.app.config` — :class:`PipelineConfig`, read from ``kgwise.toml`` and validated strictly;
* :mod:`~kgwise.app.pipeline` — :class:`Pipeline`: ``answer`` / ``feedback`` / ``status``;
* :mod:`~kgwise.app.fit` — :func:`fit` on labelled dev questions: router warm start, per-arm sets;
* :mod:`~kgwise.app.state` — the state directory (router, pending decisions, calibrations, coverage);
* :mod:`~kgwise.app.arms`, :mod:`~kgwise.app.router` — arms at run time, the one adapter to the router.
"""

from kgwise.app.config import PipelineConfig
from kgwise.app.fit import FitReport, fit
from kgwise.app.pipeline import (
    BudgetExhaustedError,
    FeedbackResult,
    Pipeline,
    PipelineResult,
    PipelineStatus,
    UnknownDecisionError,
)

__all__ = ["BudgetExhaustedError", "FeedbackResult", "FitReport", "Pipeline", "PipelineConfig",
           "PipelineResult", "PipelineStatus", "UnknownDecisionError", "fit"]
