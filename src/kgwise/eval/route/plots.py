"""Figures of the routing report (matplotlib, Agg): Pareto error rate vs cost (Coke Fig. 2), selection
heatmap over iterations (Fig. 4), selection-regret curve (Fig. 3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_all", "plot_heatmap", "plot_pareto", "plot_regret"]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _sweep(ax: Any, rows: list[dict[str, Any]], label: str, marker: str, colour: str,
           tag: Callable[[dict[str, Any]], str]) -> None:
    """One Coke sweep as error rate vs cost with error bars, each point tagged."""
    if not rows:
        return
    ax.errorbar([b["cost"] for b in rows], [1 - b["accuracy"] for b in rows],
                yerr=[b["accuracy_std"] for b in rows], xerr=[b["cost_std"] for b in rows],
                marker=marker, color=colour, label=label)
    for b in rows:
        ax.annotate(tag(b), (b["cost"], 1 - b["accuracy"]), fontsize=6, color=colour)


def _times(b: dict[str, Any]) -> str:
    return f"{b['budget_vs_best_arm']:g}×"


def _ran(part: Any) -> Any:
    """A report part, or nothing to draw when it was skipped (``{"skipped": why}``)."""
    return type(part)() if isinstance(part, dict) and "skipped" in part else part


def plot_pareto(report: dict[str, Any], path: Path) -> Path:
    """Error rate vs cost: single arms, random, oracle, Coke's budget sweep, threshold router, mabwiser."""
    fig, ax = plt.subplots(figsize=(10.5, 5))
    unit = report.get("setup", {}).get("unit", "$")
    for name, r in report["arms"].items():
        ax.scatter(r["cost"], 1 - r["accuracy"], marker="s", color="grey")
        ax.annotate(
            name, (r["cost"], 1 - r["accuracy"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    _sweep(ax, _ran(report["budget_sweep"]), "Coke, budget sweep", "o", "tab:red",
           lambda b: f"B={b['budget_fraction']:g}")
    _sweep(ax, report.get("paced_budget_sweep") or [], "Coke, paced budget (× best arm's cost)", "D",
           "tab:purple", _times)
    _sweep(ax, report.get("price_paced_budget_sweep") or [], "Coke, price-paced", "P", "tab:cyan", _times)
    for (name, variant), colour in zip((report.get("context_variants") or {}).items(),
                                       ("tab:brown", "tab:pink", "tab:olive"), strict=False):
        _sweep(ax, variant["paced_budget_sweep"], f"Coke on context {name}, paced", "v", colour, _times)
        _sweep(ax, variant.get("price_paced_budget_sweep") or [], f"Coke on context {name}, price-paced",
               "P", colour, _times)
    curve = report["threshold_router"]["curve"]
    ax.plot(
        [p["cost"] for p in curve],
        [1 - p["accuracy"] for p in curve],
        color="tab:blue",
        marker=".",
        label=f"threshold router ({report['threshold_router']['cheap_arm']} → "
        f"{report['threshold_router']['strong_arm']})",
    )
    for key, label, colour in (
        ("random", "random", "black"),
        ("mabwiser_linucb", "mabwiser LinUCB", "tab:green"),
    ):
        r = report[key]
        if "skipped" in r:
            continue
        ax.errorbar(
            r["cost"],
            1 - r["accuracy"],
            yerr=r["accuracy_std"],
            xerr=r["cost_std"],
            marker="^",
            color=colour,
            label=label,
        )
    for key, r in _ran(report["ablations"]).items():
        ax.scatter(r["cost"], 1 - r["accuracy"], marker="x", label=f"Coke {key}")
    o = report["oracle"]
    ax.scatter(o["cost"], 1 - o["accuracy"], marker="*", s=120, color="gold", label="oracle")
    ax.set_xscale(
        "symlog", linthresh=max(1e-4, min(r["cost"] for r in report["arms"].values() if r["cost"] > 0))
    )
    ax.set_xlabel(f"total cost ({unit})")
    ax.set_ylabel("error rate")
    ax.set_title("Error rate vs cost (lower left is better)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the points, not on them
    return _save(fig, path)


def plot_heatmap(report: dict[str, Any], path: Path) -> Path:
    """Share of Coke's selections per arm in consecutive windows of iterations (mean over seeds)."""
    hm = report["heatmap"]
    share = hm["share"]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(hm["arms"]) + 1.5))
    im = ax.imshow(
        [list(col) for col in zip(*share, strict=True)], aspect="auto", cmap="Blues", vmin=0, vmax=1
    )
    ax.set_yticks(range(len(hm["arms"])), hm["arms"])
    ends = report["regret"]["coke"]["window_end"]
    ax.set_xticks(range(len(ends)), [str(e) for e in ends], fontsize=7)
    ax.set_xlabel("iteration (end of window)")
    ax.set_title("Coke: share of selections per arm")
    fig.colorbar(im, ax=ax)
    return _save(fig, path)


def plot_regret(report: dict[str, Any], path: Path) -> Path:
    """Selection regret per window of iterations for Coke and the baselines (mean over seeds)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, r in report["regret"].items():
        ax.plot(r["window_end"], r["selection_regret"], marker="o", label=name)
    ax.set_xlabel("iteration k")
    ax.set_ylabel("selection regret μ(a*) − μ(a_k)")
    ax.set_title("Selection regret over iterations")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_all(report: dict[str, Any], prefix: Path) -> list[Path]:
    """The three figures, saved as ``<prefix>_pareto.png``, ``_heatmap.png``, ``_regret.png``."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    return [
        plot_pareto(report, prefix.with_name(prefix.name + "_pareto.png")),
        plot_heatmap(report, prefix.with_name(prefix.name + "_heatmap.png")),
        plot_regret(report, prefix.with_name(prefix.name + "_regret.png")),
    ]
