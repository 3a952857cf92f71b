"""Plot of ``kgwise eval pipeline``'s sets under routing: per α, each routed arm's coverage in every split —
UAG calibrated over all fit questions beside UAG calibrated per arm, or the pipeline's own held-out
calibration (:mod:`kgwise.eval.pipeline_sets`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_set_coverage"]


def plot_set_coverage(runs: Sequence[Mapping[str, Any]], arms: Sequence[str], path: Path,
                      calibration: str = "fit-half", uncertified: str = "largest") -> Path | None:
    """Write the figure to ``path`` (PNG): one panel per α, per arm the splits' coverages (a point per
    split, with the number of splits whose sets were certified) and the 1 − α line; ``calibration``: the
    sets' (:data:`~kgwise.eval.pipeline_sets.CALIBRATIONS`), ``uncertified``: a held-out group's fallback;
    ``None`` when the runs hold no sets."""
    rows = [r["answer_sets"] for r in runs if r.get("answer_sets")]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    alphas = [a["alpha"] for a in rows[0]["alphas"]]
    routed = [a for a in arms if any(a in s["alphas"][0].get("arms", {}) for s in rows)]
    fig, axes = plt.subplots(1, len(alphas), figsize=(4.5 * len(alphas), 4), squeeze=False)
    rng = np.random.default_rng(0)
    for k, (ax, alpha) in enumerate(zip(axes[0], alphas, strict=True)):
        fallback = "UAG's largest set" if uncertified == "largest" else "certified on all of them"
        kinds = (((0.0, "arms", f"per routed arm on the held-out questions (else {fallback})", "tab:blue"),)
                 if calibration == "held-out" else
                 ((-0.17, "arms", "calibrated on all fit questions", "tab:blue"),
                  (0.17, "per_arm", "calibrated per arm (out-of-fold groups)", "tab:orange")))
        for shift, key, label, colour in kinds:
            xs, ys = [], []
            for j, arm in enumerate(routed):
                for s in rows:
                    row = s["alphas"][k]
                    got = row.get(key, {}).get(arm) if row.get("certified") or key == "per_arm" else None
                    if got is not None and got.get("certified", True):
                        xs.append(j + shift + rng.uniform(-0.06, 0.06))
                        ys.append(got["coverage"])
            if xs:
                ax.scatter(xs, ys, s=9, alpha=0.6, color=colour, label=label)
        ax.axhline(1 - alpha, color="k", ls="--", lw=1, label="1 − α")
        ax.set_xticks(range(len(routed)), routed, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("coverage of the arm's test questions")
        ax.set_title(f"α = {alpha:g}, {len(rows)} splits (no point: no set)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
