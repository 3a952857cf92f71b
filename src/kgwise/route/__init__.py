"""Cost-efficient routing (Coke, Dong et al.): per question, a cheap KG model or an LLM, within a budget.

* :mod:`~kgwise.route.arms` — an arm: cluster, unit cost, live or replayed predictor;
* :mod:`~kgwise.route.coke` — the router (Eq. 2–14): cluster Thompson sampling + LinUCB − λ·cost regret;
* :mod:`~kgwise.route.service` — a router in use: its state file and the decisions awaiting feedback;
* :mod:`~kgwise.route.table` / :mod:`~kgwise.route.replay` — recorded per-question outcomes and costs;
* :mod:`~kgwise.route.live` — outcomes of live arms on labelled questions;
* :mod:`~kgwise.route.baselines` — random, threshold router, mabwiser LinUCB, hindsight cascade;
* :mod:`~kgwise.route.experiment` / :mod:`~kgwise.route.plots` — ``kgwise eval route``;
* :mod:`~kgwise.route.bench` — ``kgwise bench route``.
"""

from kgwise.route.arms import Arm, ArmResult, Predictor, ReplayPredictor
from kgwise.route.coke import BudgetExceededError, CokeConfig, CokeRouter
from kgwise.route.table import ArmInfo, OutcomeTable

__all__ = [
    "Arm",
    "ArmInfo",
    "ArmResult",
    "BudgetExceededError",
    "CokeConfig",
    "CokeRouter",
    "OutcomeTable",
    "Predictor",
    "ReplayPredictor",
]
