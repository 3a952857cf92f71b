"""Cost-efficient routing (Coke, Dong et al.): per question, a cheap KG model or an LLM, within a budget.

* :mod:`~kgwise.route.arms` — an arm: name, cluster, unit cost, live or replayed predictor;
* :mod:`~kgwise.route.coke` — the router (Eq. 2–14): cluster Thompson sampling + LinUCB − λ·cost regret;
* :mod:`~kgwise.route.table` — per-question outcomes and costs of every arm, and graded logs.

Experiments, baselines and benchmarks of the router live in :mod:`kgwise.eval.route`.
"""

from kgwise.route.arms import Arm, ArmInfo, ArmResult, ArmSpec, Predictor, ReplayPredictor
from kgwise.route.coke import BudgetExceededError, CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable

__all__ = [
    "Arm",
    "ArmInfo",
    "ArmResult",
    "ArmSpec",
    "BudgetExceededError",
    "CokeConfig",
    "CokeRouter",
    "OutcomeTable",
    "Predictor",
    "ReplayPredictor",
]
