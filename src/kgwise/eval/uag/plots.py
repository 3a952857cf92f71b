"""Fig. 3-style plots of a ``kgwise eval uag`` report: ECR vs α (with the 1 − α line) and APSS vs α."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_report"]

_LABELS = {
    "uag": "UAG (fixed-sequence LTT)",
    "uag_bonferroni": "UAG (Bonferroni LTT)",
    "uag_top_p": "UAG top-p (paper, no guarantee)",
    "uag_eq6": "UAG, Eq. 6 scores only (fixed-sequence LTT)",
    "uag_gnn": "UAG ∪ GNN candidates (fixed-sequence LTT)",
    "split_cp": "Split CP (ReaRev GNN)",
    "top_k": "Top-K (ReaRev GNN)",
}


def plot_report(report: dict[str, Any], alphas: Sequence[float], out_dir: Path, stem: str = "uag"
                ) -> list[Path]:
    """Write ``{stem}_ecr.png`` and ``{stem}_apss.png`` into ``out_dir``; methods that abstained at an α
    have no point there."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for key, ylabel, fname in (("ecr", "empirical coverage rate", "ecr"), ("apss", "avg. prediction set size",
                                                                          "apss")):
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for method, label in _LABELS.items():
            if method not in report:
                continue
            xs, ys, es = [], [], []
            for a in alphas:
                e = report[method].get(f"{a:g}", {})
                if e.get(key) is not None:
                    xs.append(a)
                    ys.append(e[key])
                    es.append(e.get(f"{key}_std") or 0.0)
            if xs:  # ± std over splits; a size bar stops at 0
                low = [min(e, y) for e, y in zip(es, ys, strict=True)] if key == "apss" else es
                ax.errorbar(xs, ys, yerr=[low, es], marker="o", capsize=3, label=label)
        paper = report.get("meta", {}).get("paper_table6_webqsp", {}).get("uag", {})
        pts = [(float(a), v[0] / 100 if key == "ecr" else v[1]) for a, v in paper.items() if v]
        if pts:
            ax.plot(*zip(*pts, strict=True), "kx", ms=8, label="UAG as reported (Table 6)")
        if key == "ecr":
            ax.plot(list(alphas), [1 - a for a in alphas], "k--", lw=1, label="1 − α")
        else:
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylim(bottom=0)
        ax.set_xlabel("risk level α")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:  # e.g. sizes where no α was certified: say so rather than leave a blank panel
            ax.text(0.5, 0.5, "no value at any α", transform=ax.transAxes, ha="center", va="center")
        fig.tight_layout()
        path = out_dir / f"{stem}_{fname}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
