"""Replay experiments (Coke §4): every policy on the same seeded question orders of an outcome table.

Per seed the questions are shuffled; each policy sees them one at a time (``pull`` with the per-arm
costs of that question, which names an arm, then ``update`` of that arm with the reward and cost).
Reported as mean ± std over seeds: single arms, random, the oracle (cheapest correct arm), Coke, its
ablations (Table 2), the λ sweep and the budget sweep (Fig. 2), paced and price-paced Coke at multiples
of the best arm's cost, the threshold router and mabwiser's LinUCB; plus the selection heatmap (Fig. 4)
and the selection-regret curve (Fig. 3). The budget is set as a fraction (``budget_fraction``) of the
cost of always calling the most expensive arm; the report gives both the fraction (``budget_fraction``)
and the amount it comes to (``budget``, in the table's unit). Runs are appended to a JSONL file as they
finish so an interrupted experiment resumes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from kgwise.errors import ConfigError
from kgwise.eval.route.baselines import (
    MabwiserConfig,
    MabwiserPolicy,
    RandomPolicy,
    ThresholdConfig,
    accuracy_at_cost,
    threshold_curve,
)
from kgwise.files import ResumeLog, source_fingerprint
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import Observer, Router, RunResult, simulate

__all__ = [
    "Observer",
    "RouteExperimentConfig",
    "Router",
    "RunResult",
    "base_cost",
    "replay_fingerprint",
    "run_experiment",
    "simulate",
    "target_checks",
]

Matrix = npt.NDArray[np.float64]
_SKIPPED = {"skipped": "slow baselines not run (--no-slow-baselines)"}


@dataclass(frozen=True)
class RouteExperimentConfig:
    """What to run. ``budget_fraction`` (B, the budget as a fraction of the cost of always calling the most
    expensive arm) and ``coke`` are the main setting; the sweeps vary λ and B around it (the paper's
    B ∈ 0.5…1.0, plus smaller budgets: when the most expensive arm costs far more than the others, B ≥ 0.5
    never binds)."""

    budget_fraction: float = 1.0
    seeds: int = 10
    coke: CokeConfig = field(default_factory=CokeConfig)
    lambdas: tuple[float, ...] = (0.001, 0.1, 1.0, 10.0, 100.0)
    budget_fractions: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    paced: tuple[float, ...] = (0.3, 0.6, 1.0, 2.0, 5.0)
    """Paced Coke (budget spread over the run, see :class:`CokeRouter`) at these multiples of the most
    accurate single arm's total cost: the regime of the target "≤ 60% of the best arm's cost"."""
    price_lam: float = 0.0
    """λ of price-paced Coke (``pacing="price"``, free arms observed on every question), run at the same
    multiples: the price already charges for cost, so by default it replaces the cost regret."""
    mabwiser: MabwiserConfig = field(default_factory=MabwiserConfig)
    threshold: ThresholdConfig = field(default_factory=ThresholdConfig)
    bins: int = 10
    budget_of: str = "dearest"
    """The arm whose total cost ``budget_fraction`` (and the sweeps' fractions) are of: ``"dearest"`` (the
    most expensive, the paper's convention) or ``"best"`` (the most accurate: the 60 % target; the best
    paid arm when the most accurate is free, :meth:`OutcomeTable.budget_arm`)."""
    slow_baselines: bool = True
    """Run mabwiser's LinUCB, the ablations and the λ and budget sweeps (most of the replay's time);
    ``False`` reports them as skipped."""

    def __post_init__(self) -> None:
        if self.budget_of not in ("dearest", "best"):
            raise ConfigError(f"budget_of must be 'dearest' or 'best', got {self.budget_of!r}")
        if not (self.budget_fraction > 0 and math.isfinite(self.budget_fraction)):
            raise ConfigError(f"budget_fraction must be a finite number > 0, got {self.budget_fraction}")
        if self.seeds < 1:
            raise ConfigError(f"seeds must be ≥ 1, got {self.seeds}")


def target_checks(accuracy_minus_best: float, cost_over_best: float | None,
                  minus_threshold_router: float) -> dict[str, Any]:
    """The three checks of a router at 60 % of the best arm's cost, with the numbers behind them."""
    return {
        "accuracy_minus_best": accuracy_minus_best,
        "cost_over_best": cost_over_best,
        "minus_threshold_router_at_equal_cost": minus_threshold_router,
        "met_accuracy_ge_best": accuracy_minus_best >= 0,
        "met_cost_le_60pct_best": cost_over_best is not None and cost_over_best <= 0.6,
        "met_above_threshold_router": minus_threshold_router > 0,
    }


def replay_fingerprint(table: OutcomeTable, contexts: Mapping[Any, npt.ArrayLike], config: Any) -> str:
    """What a resumable replay's results depend on: the table's questions and outcomes, the per-question
    contexts, the run's ``config`` (JSON-able) and the routing code (see :class:`~kgwise.files.ResumeLog`)."""
    return json.dumps(
        {
            "n": table.n_questions,
            "arms": table.arms,
            "qids_hash": hashlib.sha1("\n".join(table.qids).encode()).hexdigest(),
            "outcomes_hash": hashlib.sha1(table.correct.tobytes() + table.cost.tobytes()).hexdigest(),
            "config": config,
            "contexts": {str(k): hashlib.sha1(np.ascontiguousarray(v, dtype=np.float64).tobytes()).hexdigest()
                         for k, v in contexts.items()},
            "code": source_fingerprint("kgwise.route", "kgwise.bandit"),
        },
        sort_keys=True,
        default=str,
    )


def base_cost(table: OutcomeTable, budget_of: str) -> float:
    """The cost a budget fraction is of: the dearest arm's total (``"dearest"``) or the most accurate
    arm's (``"best"``; the best paid arm's when that is free)."""
    totals = table.cost.sum(axis=0)
    return float(totals[table.budget_arm()] if budget_of == "best" else totals.max())


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def _summary(runs: Sequence[RunResult], arms: Sequence[str]) -> dict[str, Any]:
    acc, acc_sd = _mean_std([r.accuracy for r in runs])
    cost, cost_sd = _mean_std([r.total_cost for r in runs])
    counts = np.mean([np.bincount(r.chosen[r.chosen >= 0], minlength=len(arms)) for r in runs], axis=0)
    unanswered = float(np.mean([(r.chosen < 0).sum() for r in runs]))
    return {
        "accuracy": acc,
        "accuracy_std": acc_sd,
        "cost": cost,
        "cost_std": cost_sd,
        "selections": {a: float(c) for a, c in zip(arms, counts, strict=True)},
        "unanswered": unanswered,
        "ms_per_question": 1000 * float(np.mean([r.seconds / max(len(r.chosen), 1) for r in runs])),
    }


def _heatmap(runs: Sequence[RunResult], n_arms: int, bins: int) -> list[list[float]]:
    """Share of selections of each arm in each of ``bins`` consecutive iteration windows (mean over seeds)."""
    n = len(runs[0].chosen)
    edges = np.linspace(0, n, bins + 1).astype(int)
    out = np.zeros((bins, n_arms))
    for r in runs:
        for b in range(bins):
            seg = r.chosen[edges[b] : edges[b + 1]]
            seg = seg[seg >= 0]
            if seg.size:
                out[b] += np.bincount(seg, minlength=n_arms) / (edges[b + 1] - edges[b])
    return (out / len(runs)).round(4).tolist()


def _regret(runs: Sequence[RunResult], orders: Sequence[npt.NDArray[np.int64]],
            any_right: npt.NDArray[np.bool_], best_cost: Matrix, bins: int) -> dict[str, list[float]]:
    """Selection regret per window (Fig. 3): ``μ(a*) − μ(a_k)`` with ``a*`` the cheapest arm that answers
    correctly (1 when some arm is right and the chosen one is wrong, else 0), and the excess cost over a*
    (``any_right``, ``best_cost``: per question, whether some arm is right and a*'s cost, the oracle's)."""
    n = len(runs[0].chosen)
    edges = np.linspace(0, n, bins + 1).astype(int)
    reg = np.zeros(bins)
    excess = np.zeros(bins)
    for r, order in zip(runs, orders, strict=True):
        rk = (any_right[order] & ~r.correct).astype(float)
        ek = r.cost - best_cost[order]
        for b in range(bins):
            reg[b] += rk[edges[b] : edges[b + 1]].mean()
            excess[b] += ek[edges[b] : edges[b + 1]].mean()
    return {
        "window_end": edges[1:].tolist(),
        "selection_regret": (reg / len(runs)).round(5).tolist(),
        "excess_cost_per_question": (excess / len(runs)).tolist(),
    }


class _Store:
    """Finished runs, keyed ``"<run>|<seed>"``, in a :class:`~kgwise.files.ResumeLog` (resume on restart)."""

    def __init__(self, path: Path | None, fingerprint: str) -> None:
        self.log = ResumeLog(path, fingerprint, on_other="restart")

    def get(self, key: str, make: Callable[[], RunResult]) -> RunResult:
        row = self.log.get(key)
        if row is not None:
            return RunResult(np.asarray(row["chosen"], dtype=np.int64),
                             np.asarray(row["correct"], dtype=bool),
                             np.asarray(row["cost"], dtype=np.float64), float(row["seconds"]))
        run = make()
        self.log.put(key, {"chosen": run.chosen.tolist(), "correct": run.correct.astype(int).tolist(),
                           "cost": run.cost.tolist(), "seconds": run.seconds})
        return run


def _paced_key(x: float, context: str | None = None, price: bool = False) -> str:
    """Where paced Coke at ``x`` × the best arm's cost is kept in the run results (``context``: its LinUCB
    context when not the question embedding; ``price``: price-paced)."""
    key = f"{'price' if price else 'paced'}={x:g}"
    return f"{context}|{key}" if context else key


def run_experiment(
    table: OutcomeTable,
    embeddings: npt.NDArray[np.floating[Any]],
    config: RouteExperimentConfig | None = None,
    progress_file: Path | None = None,
    show_progress: bool = True,
    contexts: Mapping[str, npt.NDArray[np.floating[Any]]] | None = None,
) -> dict[str, Any]:
    """Every policy of the report on ``config.seeds`` question orders: ``kgwise eval route``'s JSON report.

    ``contexts``: other per-question contexts for Coke's LinUCB term in place of the question embedding
    (e.g. what the free KG models say before any LLM is called); each runs with ``config.coke`` at the
    main budget and paced at every ``config.paced`` multiple (report key ``context_variants``)."""
    cfg = config or RouteExperimentConfig()
    n, m = table.n_questions, table.n_arms
    emb = np.asarray(embeddings, dtype=np.float64)
    variants_ctx = {name: np.asarray(c, dtype=np.float64) for name, c in (contexts or {}).items()}
    all_ctx: dict[str | None, Matrix] = {None: emb}  # None: the question embedding
    all_ctx.update(variants_ctx)
    for name, rows in all_ctx.items():
        if rows.ndim != 2 or rows.shape[0] != n:
            raise ConfigError(f"{name or 'embeddings'}: {rows.shape[0] if rows.ndim else 0} rows for {n} "
                              "questions")
    arm_cost = table.cost.sum(axis=0)
    arm_acc = table.correct.mean(axis=0)
    best = int(np.argmax(arm_acc))
    budget_base = base_cost(table, cfg.budget_of)
    bins = max(1, min(cfg.bins, n))  # no empty iteration windows
    seeds = list(range(cfg.seeds))
    orders = [np.random.default_rng(s).permutation(n) for s in seeds]
    store = _Store(progress_file, replay_fingerprint(table, all_ctx, asdict(cfg)))

    def coke_runs(coke: CokeConfig, budget_frac: float, paced: bool = False, context: str | None = None,
                  observe: bool = False) -> list[RunResult]:
        key = json.dumps([asdict(coke), budget_frac] + (["paced"] if paced else [])
                         + ([context] if context else []) + (["observe"] if observe else []), sort_keys=True)
        x = all_ctx[context]
        out = []
        for s, order in zip(seeds, orders, strict=True):

            def make(s: int = s, order: npt.NDArray[np.int64] = order) -> RunResult:
                router = CokeRouter(
                    table.arm_specs(),
                    x.shape[1],
                    budget=budget_frac * budget_base,
                    config=coke,
                    seed=s,
                    horizon=n if paced else None,
                )
                return simulate(router, table, x, order, router if observe else None)

            out.append(store.get(f"coke{key}|{s}", make))
            bar.update(1)
        return out

    variants: list[tuple[str, CokeConfig, float]] = [("coke", cfg.coke, cfg.budget_fraction)]
    slow = cfg.slow_baselines
    variants += [
        ("wo_Ec", replace(cfg.coke, use_cluster=False), cfg.budget_fraction),
        ("wo_Ea", replace(cfg.coke, use_context=False), cfg.budget_fraction),
        ("wo_Ra", replace(cfg.coke, lam=0.0), cfg.budget_fraction),
    ] if slow else []
    variants += [(f"lambda={lam:g}", replace(cfg.coke, lam=lam), cfg.budget_fraction)
                 for lam in (cfg.lambdas if slow else ())]
    variants += [(f"budget={b:g}", cfg.coke, b) for b in (cfg.budget_fractions if slow else ())]
    ref = table.budget_arm()  # the best arm, or the best paid arm when that is free
    paced = [(x, x * float(arm_cost[ref]) / budget_base) for x in cfg.paced] if budget_base > 0 else []
    total = len(seeds) * (len(variants) + (1 + len(variants_ctx)) * 2 * len(paced) + len(variants_ctx)
                          + 1 + slow)
    priced = replace(cfg.coke, pacing="price", lam=cfg.price_lam)
    bar = tqdm(total=total, desc="route replay", disable=not show_progress)
    results: dict[str, list[RunResult]] = {}
    for name, coke, b in variants:
        results[name] = coke_runs(coke, b)
    for ctx_name in all_ctx:
        if ctx_name is not None:
            results[f"{ctx_name}|coke"] = coke_runs(cfg.coke, cfg.budget_fraction, context=ctx_name)
        for x, b in paced:
            results[_paced_key(x, ctx_name)] = coke_runs(cfg.coke, b, paced=True, context=ctx_name)
            results[_paced_key(x, ctx_name, price=True)] = coke_runs(priced, b, paced=True, context=ctx_name,
                                                                    observe=True)
    budget_abs = cfg.budget_fraction * budget_base
    rand_runs: list[RunResult] = []
    mab_runs: list[RunResult] = []
    cost_ref = float(table.cost.mean(axis=0).max()) or 1.0
    for s, order in zip(seeds, orders, strict=True):

        def rand(s: int = s, order: npt.NDArray[np.int64] = order) -> RunResult:
            return simulate(RandomPolicy(table.arms, budget_abs, seed=s), table, emb, order)

        def mab(s: int = s, order: npt.NDArray[np.int64] = order) -> RunResult:
            policy = MabwiserPolicy(table.arms, cost_ref, budget_abs, cfg.mabwiser, seed=s)
            return simulate(policy, table, emb, order)

        rand_runs.append(store.get(f"random|{cfg.budget_fraction}|{s}", rand))
        bar.update(1)
        if slow:
            mab_runs.append(store.get(f"mabwiser|{cfg.budget_fraction}|{s}", mab))
            bar.update(1)
    bar.close()

    arms_report = {
        a: {
            "accuracy": float(table.correct[:, j].mean()),
            "cost": float(table.cost[:, j].sum()),
            "cluster": table.clusters[j],
            "reported_accuracy": table.reported[j],
        }
        for j, a in enumerate(table.arms)
    }
    any_right: npt.NDArray[np.bool_] = np.asarray(table.correct.any(axis=1))
    oracle_cost = np.where(table.correct, table.cost, np.inf).min(axis=1)
    oracle_cost = np.where(any_right, oracle_cost, table.cost.min(axis=1))
    coke_sum = _summary(results["coke"], table.arms)

    # threshold router: cheapest arm (ties: most accurate) vs the most accurate arm
    cheap = int(np.lexsort((-arm_acc, arm_cost))[0])
    others = [j for j in range(m) if j != cheap] or [cheap]
    strong = max(others, key=lambda j: (arm_acc[j], -arm_cost[j]))  # most accurate other arm
    curves = [
        threshold_curve(
            emb,
            table.correct[:, cheap],
            table.correct[:, strong],
            table.cost[:, cheap],
            table.cost[:, strong],
            cfg.threshold,
            seed=s,
        )
        for s in seeds
    ]
    mean_curve = []
    for i in range(len(curves[0])):
        point = {k: float(np.mean([c[i][k] for c in curves])) for k in curves[0][i]}
        point["accuracy_std"] = _mean_std([c[i]["accuracy"] for c in curves])[1]
        mean_curve.append(point)
    at_coke = [accuracy_at_cost(c, coke_sum["cost"]) for c in curves]
    tr_acc, tr_sd = _mean_std(at_coke)

    def paced_row(x: float, b: float, context: str | None = None, price: bool = False) -> dict[str, Any]:
        s = _summary(results[_paced_key(x, context, price)], table.arms)
        tr = _mean_std([accuracy_at_cost(c, s["cost"]) for c in curves])
        return {"budget_vs_best_arm": x, "budget_fraction": b, "budget": b * budget_base} | s | {
            "threshold_router_at_equal_cost": tr[0], "threshold_router_at_equal_cost_std": tr[1]}

    paced_sweep = [paced_row(x, b) for x, b in paced]
    price_sweep = [paced_row(x, b, price=True) for x, b in paced]
    report: dict[str, Any] = {
        "setup": {
            "questions": n,
            "seeds": cfg.seeds,
            "unit": table.unit,
            "budget_fraction": cfg.budget_fraction,
            "budget_of": cfg.budget_of,
            "budget": budget_abs,
            "most_expensive_arm": table.arms[int(np.argmax(arm_cost))],
            "coke_config": asdict(cfg.coke) | {"gamma": cfg.coke.gamma},
            "mabwiser_config": asdict(cfg.mabwiser) | {"cost_ref": cost_ref},
        },
        "arms": arms_report,
        "random": _summary(rand_runs, table.arms),
        "oracle": {"accuracy": float(any_right.mean()), "cost": float(oracle_cost.sum())},
        "coke": coke_sum,
        "ablations": {k: _summary(results[k], table.arms) for k in ("wo_Ec", "wo_Ea", "wo_Ra")} if slow else
        _SKIPPED,
        "threshold_router": {
            "cheap_arm": table.arms[cheap],
            "strong_arm": table.arms[strong],
            "accuracy_at_coke_cost": tr_acc,
            "accuracy_at_coke_cost_std": tr_sd,
            "cost": coke_sum["cost"],
            "curve": mean_curve,
        },
        "mabwiser_linucb": _summary(mab_runs, table.arms) if slow else _SKIPPED,
        "lambda_sweep": [
            {"lambda": lam} | _summary(results[f"lambda={lam:g}"], table.arms) for lam in cfg.lambdas
        ] if slow else _SKIPPED,
        "budget_sweep": [
            {"budget_fraction": b, "budget": b * budget_base}
            | _summary(results[f"budget={b:g}"], table.arms)
            for b in cfg.budget_fractions
        ] if slow else _SKIPPED,
        "paced_budget_sweep": paced_sweep,
        "price_paced_config": asdict(priced) | {"gamma": priced.gamma, "observe_free_arms": True},
        "price_paced_budget_sweep": price_sweep,
        "context_variants": {
            c: {
                "dim": int(variants_ctx[c].shape[1]),
                "coke": _summary(results[f"{c}|coke"], table.arms),
                "paced_budget_sweep": [paced_row(x, b, c) for x, b in paced],
                "price_paced_budget_sweep": [paced_row(x, b, c, price=True) for x, b in paced],
            }
            for c in variants_ctx
        },
        "heatmap": {
            "arms": list(table.arms),
            "bins": bins,
            "share": _heatmap(results["coke"], m, bins),
        },
        "regret": {
            name: _regret(runs, orders, any_right, oracle_cost, bins)
            for name, runs in (
                ("coke", results["coke"]),
                ("random", rand_runs),
                *((("mabwiser_linucb", mab_runs), ("wo_Ea", results["wo_Ea"])) if slow else ()),
            )
        },
        "targets": {
            "best_arm": table.arms[best],
            "best_arm_accuracy": float(arm_acc[best]),
            "best_arm_cost": float(arm_cost[best]),
            "coke_accuracy_minus_best": coke_sum["accuracy"] - float(arm_acc[best]),
            "coke_cost_over_best": coke_sum["cost"] / float(arm_cost[best]) if arm_cost[best] > 0 else None,
            "coke_minus_threshold_router_at_equal_cost": coke_sum["accuracy"] - tr_acc,
        },
    }
    t = report["targets"]
    t["met_accuracy_ge_best"] = t["coke_accuracy_minus_best"] >= 0
    t["met_cost_le_60pct_best"] = t["coke_cost_over_best"] is not None and t["coke_cost_over_best"] <= 0.6
    t["met_above_threshold_router"] = t["coke_minus_threshold_router_at_equal_cost"] > 0
    def paced_60(sweep: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The three checks for paced Coke with B = 60% of the best arm's cost."""
        at60 = next((r for r in sweep if r["budget_vs_best_arm"] == 0.6), None)
        if at60 is None:
            return None
        return target_checks(at60["accuracy"] - float(arm_acc[best]),
                             at60["cost"] / float(arm_cost[best]) if arm_cost[best] > 0 else None,
                             at60["accuracy"] - at60["threshold_router_at_equal_cost"])

    for sweep, into in [(paced_sweep, "paced_60"), (price_sweep, "price_paced_60")]:
        if (p60 := paced_60(sweep)) is not None:
            t[into] = p60
    for variant in report["context_variants"].values():
        for into in ("paced_60", "price_paced_60"):
            sweep_key = into.replace("60", "budget_sweep")
            if (p60 := paced_60(variant[sweep_key])) is not None:
                variant[into] = p60
    return report
