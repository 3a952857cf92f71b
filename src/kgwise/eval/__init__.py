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
