"""Evaluation (layer 5): the experiments that reproduce the papers' tables, their baselines, readers of
recorded model outputs, plots and speed benchmarks. Installed with the ``eval`` extra
(``pip install kgwise[eval]``: matplotlib, networkx, psutil, joblib, mabwiser); the product
(:mod:`kgwise.app` and below) never imports it.

* :mod:`~kgwise.eval.recorded` — recorded per-question outputs of published systems;
* :mod:`~kgwise.eval.llm` — an LLM alone ("w/o KG"), ``kgwise eval llm``;
* :mod:`~kgwise.eval.knowgpt` / :mod:`~kgwise.eval.links` — KnowGPT's Tables 3–4, ``kgwise eval knowgpt``;
* :mod:`~kgwise.eval.route` — Coke's replay and live experiments, ``kgwise eval route``;
* :mod:`~kgwise.eval.uag` — UAG and its baselines over random splits, ``kgwise eval uag``;
* :mod:`~kgwise.eval.bench` — speed benchmarks, ``kgwise bench …``.
"""

from __future__ import annotations

__all__ = ["register_tables"]


def register_tables() -> None:
    """Import every module that registers a hyper-parameter table or a command's own defaults with
    :mod:`kgwise.settings` (installed with :func:`kgwise.settings.on_demand` by the command line, so that
    ``kgwise eval config show`` and ``--config`` files know every table)."""
    import kgwise.conformal.calibrated
    import kgwise.eval.knowgpt
    import kgwise.inject.bandit
    import kgwise.kg.linking
    import kgwise.kgm.config
    import kgwise.route.coke  # noqa: F401
