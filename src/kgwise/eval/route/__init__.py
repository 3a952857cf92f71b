"""Coke's experiments (``kgwise eval route``, ``eval route-live``).

* :mod:`~kgwise.eval.route.replay` — WebQSP arms from recorded outputs;
* :mod:`~kgwise.eval.route.live` — outcomes of live arms on labelled questions;
* :mod:`~kgwise.eval.route.baselines` — random, threshold router, mabwiser LinUCB, hindsight cascade;
* :mod:`~kgwise.eval.route.experiment` / :mod:`~kgwise.eval.route.tuning` — replays and cross-tuning;
* :mod:`~kgwise.eval.route.plots` — the report's figures.
"""
