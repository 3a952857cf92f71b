"""Coke's experiments (``kgwise eval route``, ``eval route-live``).

* :mod:`~kgwise.eval.route.logs` — the one door: a graded log → what every replay reads (WebQSP's recorded
  arms enter as their graded log, :mod:`~kgwise.eval.route.export`);
* :mod:`~kgwise.eval.route.replay` — WebQSP arms from recorded outputs;
* :mod:`~kgwise.eval.route.live` — outcomes of live arms on labelled questions;
* :mod:`~kgwise.eval.route.baselines` — random, threshold router, mabwiser LinUCB, hindsight cascade;
* :mod:`~kgwise.eval.route.experiment` / :mod:`~kgwise.eval.route.tuning` — replays and cross-tuning;
* :mod:`~kgwise.eval.route.learned` — routers that start from a learned success predictor, a cascade, and
  the one cross-fitting selects;
* :mod:`~kgwise.eval.route.report` — ``eval route``'s whole report;
* :mod:`~kgwise.eval.route.plots` — the report's figures.
"""
