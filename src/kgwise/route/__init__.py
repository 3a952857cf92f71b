"""Cost-efficient routing (Coke, Dong et al.): per question, a cheap KG model or an LLM, within a budget.

* :mod:`~kgwise.route.arms` — an arm as the router knows it: name, cluster, reported accuracy;
* :mod:`~kgwise.route.coke` — the router (Eq. 2–14): cluster Thompson sampling + LinUCB − λ·cost regret;
* :mod:`~kgwise.route.table` — per-question outcomes and costs of every arm, and graded logs.

Experiments, baselines and benchmarks of the router live in :mod:`kgwise.eval.route`.
"""

from kgwise.route.arms import ArmInfo, ArmSpec
from kgwise.route.coke import BudgetExceededError, CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable

__all__ = [
    "ArmInfo",
    "ArmSpec",
    "BudgetExceededError",
    "CokeConfig",
    "CokeRouter",
    "OutcomeTable",
]
