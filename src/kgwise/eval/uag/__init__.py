"""UAG's experiments (``kgwise eval uag``): UAG, its variants, split CP and Top-K over random splits.

* :mod:`~kgwise.eval.uag.experiment` — the runner and its report;
* :mod:`~kgwise.eval.uag.baselines` — split CP and Top-K over a scored retriever's candidates;
* :mod:`~kgwise.eval.uag.plots` — Fig. 3-style plots.
"""
